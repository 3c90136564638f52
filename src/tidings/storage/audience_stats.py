"""Named queries for the dashboard's audience figures: subscriptions per newsletter and state,
and confirmations and unsubscribes per day."""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise

from sqlalchemy import Column, ColumnElement, case, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.subscribers import state_clause
from tidings.storage.tables import subscriptions


async def subscriptions_by_state(conn: AsyncConnection) -> list[tuple[int, str, int]]:
    """(newsletter id, state, count) for every pair that has subscriptions."""
    state = case(
        *((state_clause(name), name) for name in ("unsubscribed", "pending")),
        else_="confirmed",
    )
    query = select(subscriptions.c.newsletter_id, state, func.count()).group_by(
        subscriptions.c.newsletter_id, state
    )
    return [(int(n), str(state), int(count)) for n, state, count in await conn.execute(query)]


async def daily_changes(conn: AsyncConnection, day_starts: list[datetime]) -> list[tuple[int, int]]:
    """(confirmed, unsubscribed) for each day from `day_starts[i]` to `day_starts[i + 1]`
    (the last bound only closes the range). One pass; days are compared as UTC instants, so
    both dialects agree whatever the server's time zone."""

    def per_day(column: Column[datetime]) -> list[ColumnElement[int]]:
        return [
            func.coalesce(func.sum(case(((column >= start) & (column < end), 1), else_=0)), 0)
            for start, end in pairwise(day_starts)
        ]

    query = select(
        *per_day(subscriptions.c.confirmed_at), *per_day(subscriptions.c.unsubscribed_at)
    ).where(
        (subscriptions.c.confirmed_at >= day_starts[0])
        | (subscriptions.c.unsubscribed_at >= day_starts[0])
    )
    row = (await conn.execute(query)).one()
    days = len(day_starts) - 1
    return [(int(row[i]), int(row[days + i])) for i in range(days)]
