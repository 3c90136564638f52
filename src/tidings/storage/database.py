"""The database handle: one async engine, read and write transactions, dialect set-up.

SQLite has one writer. Rather than emulate row locks, every write transaction starts with
`BEGIN IMMEDIATE` (taking the write lock up front, so two writers never deadlock upgrading
from read to write) and writers inside one process queue on an asyncio lock instead of
spinning in the busy handler. PostgreSQL transactions are ordinary READ COMMITTED ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from tidings.storage.dialect import (
    backend_name,
    dialect_name,
    is_postgresql,
    is_postgresql_url,
    is_sqlite,
    is_sqlite_url,
)
from tidings.storage.errors import (
    busy_as_retry_later,
    missing_sqlite_folder,
    unreachable_database,
    unstorable_values,
)

_IMMEDIATE = "tidings_sqlite_immediate"


def async_url(url: str) -> str:
    """Map a plain database URL onto the async drivers tidings uses."""
    parsed = make_url(url)
    if is_sqlite_url(parsed):
        return parsed.set(drivername="sqlite+aiosqlite").render_as_string(hide_password=False)
    if is_postgresql_url(parsed):
        return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    raise ValueError(f"unsupported database backend: {backend_name(parsed)}")


def libpq_url(url: str | URL) -> str:
    """The same PostgreSQL database as a libpq connection string, for psycopg used directly
    (LISTEN, benchmarks): the URL without SQLAlchemy's driver name."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class Database:
    """An engine plus the two kinds of transaction tidings uses: `read()` and `write()`.
    A connection that cannot be made raises `DatabaseUnreachable`, naming `shown_url`."""

    def __init__(self, engine: AsyncEngine, shown_url: str | None = None) -> None:
        self.engine = engine
        self.dialect = dialect_name(engine)
        self.shown_url = shown_url or engine.url.render_as_string(hide_password=True)
        self._writer = asyncio.Lock() if self.is_sqlite else None

    @property
    def is_sqlite(self) -> bool:
        return is_sqlite(self.engine)

    @property
    def is_postgresql(self) -> bool:
        return is_postgresql(self.engine)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A read transaction: one consistent snapshot, no write lock."""
        with busy_as_retry_later(), unstorable_values():
            async with self._connect() as conn, conn.begin():
                yield conn

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction, committed on exit and rolled back on error. A lock that stays
        taken past the busy timeout raises `DatabaseBusy`."""
        with busy_as_retry_later(), unstorable_values():
            if self._writer is None:
                async with self._connect() as conn, conn.begin():
                    yield conn
                return
            async with self._writer, self._connect() as conn:
                conn = await conn.execution_options(**{_IMMEDIATE: True})
                async with conn.begin():
                    yield conn

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[AsyncConnection]:
        """A connection; failing to make one is `DatabaseUnreachable`, while errors of the
        work done on it pass unchanged."""
        if self.is_sqlite and missing_sqlite_folder(self.engine.url):
            # Not left to the driver: aiosqlite's failed connect races the loop's closing and
            # prints a thread traceback after our message.
            raise unreachable_database(self.engine.url, self.shown_url, FileNotFoundError())
        connected = False
        try:
            async with self.engine.connect() as conn:
                connected = True
                yield conn
        except (DBAPIError, OSError) as exc:
            if connected:
                raise
            raise unreachable_database(self.engine.url, self.shown_url, exc) from None

    async def dispose(self) -> None:
        await self.engine.dispose()


def create_database(
    url: str, *, busy_timeout_ms: int = 30_000, pool_size: int = 10, shown_url: str | None = None
) -> Database:
    """Build the engine for `url` with tidings' per-dialect connection settings. `shown_url`
    is how errors name it (the password masked); SQLAlchemy's masking when not given."""
    driver_url = async_url(url)
    # Parameters are addresses, names and token hashes: never in a log line or an error
    # message, whatever the log level.
    kwargs: dict[str, Any] = {"hide_parameters": True}
    if is_sqlite_url(driver_url):
        kwargs["connect_args"] = {"timeout": busy_timeout_ms / 1000}
        if make_url(driver_url).database in (None, "", ":memory:"):
            raise ValueError("an in-memory SQLite database cannot be shared; give a file path")
    else:
        kwargs.update(pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True)
    engine = create_async_engine(driver_url, **kwargs)
    if is_sqlite(engine):
        _configure_sqlite(engine, busy_timeout_ms)
    else:
        _configure_postgresql(engine)
    return Database(engine, shown_url)


def _configure_postgresql(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Every timestamp is stored and handled in UTC. In a UTC session psycopg hands them
        # over already in `datetime.UTC` (a server zone like Etc/UTC gives a ZoneInfo that
        # each of the thousands of values read per batch would convert), and date arithmetic
        # in SQL does not depend on the server's configured zone.
        cursor = dbapi_connection.cursor()
        cursor.execute("SET TIME ZONE 'UTC'")
        cursor.close()
        dbapi_connection.commit()


def _configure_sqlite(engine: AsyncEngine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the sqlite3 module, decide when transactions begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get(_IMMEDIATE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
