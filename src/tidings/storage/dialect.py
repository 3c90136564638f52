"""The one dialect seam: "is this PostgreSQL", the SQL compiled differently for each dialect,
the dialect's own INSERT for ON CONFLICT, and the column type for UTC times (SQLite has no
timezone type). No other module compares a dialect name
(tests/unit/test_house_rules.py holds it so).

Where a named query does the same work in one statement on PostgreSQL and step by step on
SQLite, the pair is named `<query>_postgresql` / `<query>_sqlite` beside one dispatcher
`<query>` that asks `is_postgresql(conn)` once; each pair has one test that the two write the
same rows (the integration tests run on both dialects).

The database's clock lives here too, as both dialects read it differently. Shared limits,
leases and due times compare times on the database server's clock, never a worker's, so a
worker with a skewed clock can neither overspend nor starve, take a live job nor start one
early (PRV-5, DLV-2):

- PostgreSQL: `clock_timestamp()`, the time of the call, for `database_now`. Not `now()`: that
  is the start of the transaction, which can lie before a wait for a row lock. The SET and
  WHERE of an `INSERT ... ON CONFLICT DO UPDATE` run once the conflicting row is locked, so the
  time they read comes after any wait for it.
- SQLite: `julianday('now')`, millisecond resolution, and the same value for every call within
  one statement step. Statements that write run under `BEGIN IMMEDIATE`, so after the lock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeAlias

from sqlalchemy import (
    ColumnElement,
    Connection,
    DateTime,
    Dialect,
    Double,
    String,
    Table,
    cast,
    extract,
    func,
    literal,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import TypeDecorator

POSTGRESQL = "postgresql"
SQLITE = "sqlite"
_POSTGRESQL_URL_NAMES = {POSTGRESQL, "postgres"}  # "postgres://" is libpq's alias

Bind: TypeAlias = AsyncConnection | AsyncEngine | Connection | Dialect


def dialect_name(bind: Bind) -> str:
    """The dialect's name, to show (health, logs); to decide, ask `is_postgresql`."""
    return (bind if isinstance(bind, Dialect) else bind.dialect).name


def backend_name(url: str | URL) -> str:
    """The database kind a URL names, to show in a message; to decide, ask `is_sqlite_url`."""
    return make_url(url).get_backend_name()


def is_postgresql(bind: Bind) -> bool:
    """The connection, engine or dialect speaks PostgreSQL."""
    return dialect_name(bind) == POSTGRESQL


def is_sqlite(bind: Bind) -> bool:
    """The connection, engine or dialect speaks SQLite."""
    return dialect_name(bind) == SQLITE


def is_sqlite_url(url: str | URL) -> bool:
    """`url` names an SQLite database (whatever its driver)."""
    return backend_name(url) == SQLITE


def is_postgresql_url(url: str | URL) -> bool:
    """`url` names a PostgreSQL database (whatever its driver, `postgres://` too)."""
    return backend_name(url) in _POSTGRESQL_URL_NAMES


def insert_for(conn: AsyncConnection, table: Table) -> Any:
    """The dialect's own INSERT construct, which has `on_conflict_do_*` (SQLite and
    PostgreSQL spell ON CONFLICT alike, but SQLAlchemy needs the dialect's `insert`)."""
    return (pg_insert if is_postgresql(conn) else sqlite_insert)(table)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes in and out, `timestamptz` on PostgreSQL.

    SQLite has no timezone type: values are stored as naive UTC and made aware on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if is_sqlite(dialect) else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):  # raw SQLite text from an expression
            value = datetime.fromisoformat(value)
        assert isinstance(value, datetime)
        zone = value.tzinfo
        if zone is UTC:  # PostgreSQL in the UTC session: thousands per batch read
            return value
        return value.replace(tzinfo=UTC) if zone is None else value.astimezone(UTC)


# -- the database's clock -------------------------------------------------------------------

_UNIX_EPOCH_JULIAN_DAY = 2440587.5
_SECONDS_PER_DAY = 86400.0


def database_now(conn: AsyncConnection) -> ColumnElement[float]:
    """Seconds since the Unix epoch on the database server's clock, as a SQL expression."""
    if is_postgresql(conn):
        return cast(extract("epoch", func.clock_timestamp()), Double())
    days = func.julianday(literal("now")) - _UNIX_EPOCH_JULIAN_DAY
    return cast(days * _SECONDS_PER_DAY, Double())


class database_timestamp(FunctionElement[datetime]):
    """The database server's current time plus `offset_seconds`, as a timestamp that compares
    and stores like a `UTCDateTime` column: what leases and due times are judged by (DLV-2),
    so a worker whose own clock is wrong can neither take a live job nor start one early.

    - PostgreSQL: `statement_timestamp()`, the start of the current statement. Not
      `clock_timestamp()`: that is volatile, and a volatile comparison cannot use the claim
      index; claims skip locked rows instead of waiting, so the statement's start is its time.
    - SQLite: `strftime('%Y-%m-%d %H:%M:%f', 'now', …)` padded to the six fractional digits
      SQLAlchemy stores, so the text compares correctly with stored values.
    """

    type = UTCDateTime()
    name = "database_timestamp"
    inherit_cache = True

    def __init__(self, offset_seconds: float = 0.0) -> None:
        # SQLite wants the offset as a modifier string; PostgreSQL as seconds.
        super().__init__(
            literal(float(offset_seconds), Double()),
            literal(f"{offset_seconds:+.6f} seconds", String()),
        )


@compiles(database_timestamp, POSTGRESQL)
def _database_timestamp_postgresql(element: database_timestamp, compiler: Any, **kw: Any) -> str:
    seconds, _modifier = element.clauses
    return f"(statement_timestamp() + make_interval(secs => {compiler.process(seconds, **kw)}))"


@compiles(database_timestamp, SQLITE)
def _database_timestamp_sqlite(element: database_timestamp, compiler: Any, **kw: Any) -> str:
    _seconds, modifier = element.clauses
    return f"(strftime('%Y-%m-%d %H:%M:%f', 'now', {compiler.process(modifier, **kw)}) || '000')"


class hour_of(FunctionElement[datetime]):
    """`hour_of(column)`: a `UTCDateTime` column's value truncated to its UTC hour, for
    counting events per hour in SQL: PostgreSQL's `date_trunc` (the session is UTC), SQLite's
    `strftime` over the stored naive UTC text."""

    type = UTCDateTime()
    name = "hour_of"
    inherit_cache = True


@compiles(hour_of, POSTGRESQL)
def _hour_of_postgresql(element: hour_of, compiler: SQLCompiler, **kw: Any) -> str:
    return f"date_trunc('hour', {compiler.process(element.clauses, **kw)})"


@compiles(hour_of, SQLITE)
def _hour_of_sqlite(element: hour_of, compiler: SQLCompiler, **kw: Any) -> str:
    return f"strftime('%Y-%m-%d %H:00:00', {compiler.process(element.clauses, **kw)})"


# -- JSON ---------------------------------------------------------------------------------


class attribute_text(FunctionElement[str]):
    """`attribute_text(column, key, path)`: a JSON object's member `key` (at JSON `path`) as
    text when it is a string or a number, else NULL: the SQL form of
    `segments.attribute_text`, for reading subscribers' `attributes`."""

    type = String()
    inherit_cache = True
    name = "attribute_text"


@compiles(attribute_text, POSTGRESQL)
def _attribute_text_postgresql(element: attribute_text, compiler: SQLCompiler, **kw: Any) -> str:
    column, key, _path = (compiler.process(clause, **kw) for clause in element.clauses)
    return (
        f"CASE WHEN jsonb_typeof({column} -> {key}) IN ('string', 'number') "
        f"THEN {column} ->> {key} END"
    )


@compiles(attribute_text, SQLITE)
def _attribute_text_sqlite(element: attribute_text, compiler: SQLCompiler, **kw: Any) -> str:
    column, _key, path = (compiler.process(clause, **kw) for clause in element.clauses)
    return (
        f"CASE WHEN json_type({column}, {path}) IN ('text', 'integer', 'real') "
        f"THEN CAST(json_extract({column}, {path}) AS TEXT) END"
    )


def json_array_elements(conn: AsyncConnection) -> Any:
    """The table-valued function giving a JSON array's elements as rows of text in a column
    `value`: PostgreSQL's `jsonb_array_elements_text`, SQLite's `json_each`."""
    return func.jsonb_array_elements_text if is_postgresql(conn) else func.json_each


def json_object_builder(conn: AsyncConnection) -> Any:
    """The function building a JSON object from alternating keys and values:
    `jsonb_build_object` on PostgreSQL, `json_object` on SQLite."""
    return func.jsonb_build_object if is_postgresql(conn) else func.json_object
