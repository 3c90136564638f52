"""The database's clock, the one dialect branch for reading it (PRV-5; DLV-2 wants the same).

Shared limits compare times on the database server's clock, never a worker's, so a worker with
a skewed clock can neither overspend nor starve. Times are seconds since the Unix epoch as a
double, read where the statement runs:

- PostgreSQL: `clock_timestamp()`, the time of the call. Not `now()`: that is the start of the
  transaction, which can lie before a wait for a row lock. The SET and WHERE of an
  `INSERT ... ON CONFLICT DO UPDATE` run once the conflicting row is locked, so the time they
  read comes after any wait for it.
- SQLite: `julianday('now')`, millisecond resolution, and the same value for every call within
  one statement step. Statements that write run under `BEGIN IMMEDIATE`, so after the lock.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Double, String, cast, extract, func, literal
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from tidings.storage.types import UTCDateTime

_UNIX_EPOCH_JULIAN_DAY = 2440587.5
_SECONDS_PER_DAY = 86400.0


def database_now(conn: AsyncConnection) -> ColumnElement[float]:
    """Seconds since the Unix epoch on the database server's clock, as a SQL expression."""
    if conn.dialect.name == "postgresql":
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


@compiles(database_timestamp, "postgresql")
def _postgresql_timestamp(element: database_timestamp, compiler: Any, **kw: Any) -> str:
    seconds, _modifier = element.clauses
    return f"(statement_timestamp() + make_interval(secs => {compiler.process(seconds, **kw)}))"


@compiles(database_timestamp, "sqlite")
def _sqlite_timestamp(element: database_timestamp, compiler: Any, **kw: Any) -> str:
    _seconds, modifier = element.clauses
    return f"(strftime('%Y-%m-%d %H:%M:%f', 'now', {compiler.process(modifier, **kw)}) || '000')"
