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
