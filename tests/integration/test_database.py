"""SQLite runs in WAL with foreign keys and serialised writers; both dialects roll back."""

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from tidings.storage.database import Database, create_database


async def test_sqlite_connection_settings(sqlite_url: str) -> None:
    """WAL lets readers run beside the writer; foreign keys are off by default in SQLite."""
    database = create_database(sqlite_url, busy_timeout_ms=1234)
    try:
        async with database.read() as conn:
            assert (await conn.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
            assert (await conn.execute(text("PRAGMA foreign_keys"))).scalar() == 1
            assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar() == 1234
    finally:
        await database.dispose()


async def test_concurrent_writers_all_commit(db: Database) -> None:
    """Read-modify-write from many tasks must neither fail with "database is locked" nor lose an
    update: writes are serialised (BEGIN IMMEDIATE on SQLite, row lock on PostgreSQL)."""
    async with db.write() as conn:
        await conn.execute(text("CREATE TABLE counter (n INTEGER NOT NULL)"))
        await conn.execute(text("INSERT INTO counter VALUES (0)"))

    async def increment() -> None:
        async with db.write() as conn:
            lock = "" if db.is_sqlite else " FOR UPDATE"
            current = (await conn.execute(text(f"SELECT n FROM counter{lock}"))).scalar_one()
            await asyncio.sleep(0)
            await conn.execute(text("UPDATE counter SET n = :n"), {"n": current + 1})

    await asyncio.gather(*(increment() for _ in range(25)))
    async with db.read() as conn:
        assert (await conn.execute(text("SELECT n FROM counter"))).scalar_one() == 25


async def test_failed_write_rolls_back(db: Database) -> None:
    """A write transaction that raises leaves nothing behind."""
    async with db.write() as conn:
        await conn.execute(text("CREATE TABLE things (id INTEGER PRIMARY KEY)"))
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await conn.execute(text("INSERT INTO things VALUES (1)"))
            await conn.execute(text("INSERT INTO things VALUES (1)"))
    async with db.read() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM things"))).scalar_one() == 0


async def test_postgresql_sessions_run_in_utc_whatever_the_server_zone(database_url: str) -> None:
    """Timestamps must mean the same instant whatever zone the server was installed with; a
    UTC session also lets psycopg hand them over without a per-value zone conversion."""
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has no session time zone")
    name = database_url.rpartition("/")[2]
    setup = create_database(database_url)
    try:
        async with setup.write() as conn:
            await conn.execute(text(f"ALTER DATABASE {name} SET TimeZone = 'America/New_York'"))
    finally:
        await setup.dispose()
    database = create_database(database_url)
    try:
        async with database.read() as conn:
            zone = (await conn.execute(text("SELECT current_setting('TimeZone')"))).scalar_one()
            stamp = (
                await conn.execute(text("SELECT TIMESTAMPTZ '2026-07-01 12:00:00+02'"))
            ).scalar_one()
        assert zone == "UTC"
        assert stamp.utcoffset().total_seconds() == 0
        assert (stamp.hour, stamp.minute) == (10, 0)
    finally:
        await database.dispose()
