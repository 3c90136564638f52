"""A lock another connection holds surfaces from the storage seam as `DatabaseBusy` on both
dialects (issue 12, item 4): the API turns it into 503 with Retry-After, workers retry it."""

from __future__ import annotations

import psycopg
import pytest

from tests.support.locks import write_lock_held
from tidings.domain.jobs import DatabaseBusy, RetryLater
from tidings.storage import migrate
from tidings.storage.database import create_database


async def test_a_lock_held_past_the_timeout_is_database_busy(database_url: str) -> None:
    """Callers branch on the error type: a held lock must read as "busy, try again" (a
    `RetryLater`), never as an unexplained driver error that becomes a 500."""
    db = create_database(database_url, busy_timeout_ms=50)
    await migrate.upgrade(db)
    try:
        if db.is_sqlite:
            with write_lock_held(database_url), pytest.raises(DatabaseBusy) as raised:
                async with db.write() as conn:
                    await conn.exec_driver_sql("UPDATE newsletters SET name = name")
        else:
            async with await psycopg.AsyncConnection.connect(database_url) as holder:
                await holder.execute("LOCK TABLE newsletters IN ACCESS EXCLUSIVE MODE")
                with pytest.raises(DatabaseBusy) as raised:
                    async with db.write() as conn:
                        await conn.exec_driver_sql("SET LOCAL lock_timeout = '50ms'")
                        await conn.exec_driver_sql("UPDATE newsletters SET name = name")
                await holder.rollback()
        assert isinstance(raised.value, RetryLater)
        assert raised.value.retry_after_seconds >= 1
        async with db.write() as conn:  # once the lock is gone, the same write goes through
            await conn.exec_driver_sql("UPDATE newsletters SET name = name")
    finally:
        await db.dispose()
