"""PostgreSQL LISTEN/NOTIFY: wake idle workers the moment a job is enqueued (DLV-4).

Polling stays the fallback: a missed notification (listener reconnecting, network blip)
costs latency, never a job.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from tidings.queue.store import NOTIFY_CHANNEL
from tidings.storage.database import Database, libpq_url

log = structlog.get_logger("tidings.queue")


async def listen_for_jobs(db: Database, wake: Callable[[], None], stop: asyncio.Event) -> None:
    """Call `wake()` for each notification until `stop` is set; reconnect on failure."""
    if not db.is_postgresql:
        return
    import psycopg  # here, not at the top: a SQLite deployment never loads the driver (9 MB)

    conninfo = libpq_url(db.engine.url)
    while not stop.is_set():
        try:
            async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
                await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                wake()  # anything enqueued while we were not listening
                while not stop.is_set():
                    async for _ in conn.notifies(timeout=1.0):
                        wake()
        except psycopg.Error as exc:
            log.warning("queue.listener_reconnecting", error_type=type(exc).__name__)
            try:
                async with asyncio.timeout(2.0):
                    await stop.wait()
            except TimeoutError:
                pass
