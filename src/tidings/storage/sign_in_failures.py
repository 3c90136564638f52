"""Named queries for recent failed sign-ins per scope: count one, read some, forget them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.dialect import insert_for
from tidings.storage.tables import sign_in_failures


@dataclass(frozen=True, slots=True)
class RecentFailures:
    failures: int
    last_failed_at: datetime


async def record(
    conn: AsyncConnection, bucket: str, *, now: datetime, forget_before: datetime
) -> int:
    """Count one failure in `bucket`; a count whose last failure is older than
    `forget_before` starts again. Returns the count, this failure included."""
    statement = insert_for(conn, sign_in_failures).values(
        bucket=bucket, failures=1, last_failed_at=now
    )
    result = await conn.execute(
        statement.on_conflict_do_update(
            index_elements=["bucket"],
            set_={
                "failures": case(
                    (sign_in_failures.c.last_failed_at < forget_before, 1),
                    else_=sign_in_failures.c.failures + 1,
                ),
                "last_failed_at": now,
            },
        ).returning(sign_in_failures.c.failures)
    )
    return int(result.scalar_one())


async def recent(
    conn: AsyncConnection, buckets: Iterable[str], *, since: datetime
) -> dict[str, RecentFailures]:
    """The counts of `buckets` whose last failure is at `since` or later."""
    rows = await conn.execute(
        select(sign_in_failures).where(
            sign_in_failures.c.bucket.in_(list(buckets))
            & (sign_in_failures.c.last_failed_at >= since)
        )
    )
    return {row.bucket: RecentFailures(row.failures, row.last_failed_at) for row in rows}


async def clear(conn: AsyncConnection, bucket_prefix: str) -> int:
    """Forget every bucket whose name starts with `bucket_prefix`."""
    result = await conn.execute(
        delete(sign_in_failures).where(
            sign_in_failures.c.bucket.startswith(bucket_prefix, autoescape=True)
        )
    )
    return int(result.rowcount)


async def prune(conn: AsyncConnection, *, before: datetime) -> int:
    result = await conn.execute(
        delete(sign_in_failures).where(sign_in_failures.c.last_failed_at < before)
    )
    return int(result.rowcount)


async def take_turn(
    conn: AsyncConnection, bucket: str, seen: RecentFailures, *, now: datetime
) -> bool:
    """Claim the one attempt a slowed bucket allows after its delay: moves its last failure to
    `now` unless another attempt did so since `seen` was read (then False: not this one)."""
    result = await conn.execute(
        update(sign_in_failures)
        .where(
            (sign_in_failures.c.bucket == bucket)
            & (sign_in_failures.c.failures == seen.failures)
            & (sign_in_failures.c.last_failed_at == seen.last_failed_at)
        )
        .values(last_failed_at=now)
    )
    return int(result.rowcount) == 1
