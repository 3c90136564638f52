"""Fixed-window rate limit counters in the database, so limits hold across processes and
restarts (AUD-5). Buckets carry keyed hashes, never raw addresses or IPs."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.dialect import insert_for
from tidings.storage.tables import rate_limits


async def hit(conn: AsyncConnection, bucket: str, window_start: datetime) -> int:
    """Count one hit in `bucket` for the window; returns the hits so far, this one included."""
    statement = insert_for(conn, rate_limits).values(
        bucket=bucket, window_start=window_start, hits=1
    )
    result = await conn.execute(
        statement.on_conflict_do_update(
            index_elements=["bucket", "window_start"],
            set_={"hits": rate_limits.c.hits + 1},
        ).returning(rate_limits.c.hits)
    )
    return int(result.scalar_one())


async def hits(conn: AsyncConnection, bucket: str, window_start: datetime) -> int:
    """The hits counted in `bucket` for the window so far (0 when none), counting nothing."""
    found = await conn.execute(
        select(rate_limits.c.hits).where(
            (rate_limits.c.bucket == bucket) & (rate_limits.c.window_start == window_start)
        )
    )
    return int(found.scalar_one_or_none() or 0)


async def clear(conn: AsyncConnection, bucket_prefix: str) -> int:
    """Delete every window of every bucket whose name starts with `bucket_prefix`."""
    result = await conn.execute(
        delete(rate_limits).where(rate_limits.c.bucket.startswith(bucket_prefix, autoescape=True))
    )
    return int(result.rowcount)


async def prune(conn: AsyncConnection, *, before: datetime) -> int:
    result = await conn.execute(delete(rate_limits).where(rate_limits.c.window_start < before))
    return int(result.rowcount)
