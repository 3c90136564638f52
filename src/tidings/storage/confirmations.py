"""Named queries for confirmation links (AUD-5, AUD-6): one row per link sent, a hash only."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.subscriptions import SubscriptionRow
from tidings.storage.tables import confirmation_tokens, subscriptions


async def add(
    conn: AsyncConnection,
    *,
    token_hash: str,
    subscription_id: int,
    now: datetime,
    expires_at: datetime,
) -> None:
    """Record a new link; the subscription's expired links are dropped on the way."""
    await conn.execute(
        delete(confirmation_tokens).where(
            confirmation_tokens.c.subscription_id == subscription_id,
            confirmation_tokens.c.expires_at < now,
        )
    )
    await conn.execute(
        insert(confirmation_tokens).values(
            token_hash=token_hash,
            subscription_id=subscription_id,
            created_at=now,
            expires_at=expires_at,
        )
    )


async def find(conn: AsyncConnection, token_hash: str) -> tuple[SubscriptionRow, datetime] | None:
    """The subscription a link names and when the link expires, or None."""
    query = (
        select(subscriptions, confirmation_tokens.c.expires_at.label("link_expires_at"))
        .join(confirmation_tokens, confirmation_tokens.c.subscription_id == subscriptions.c.id)
        .where(confirmation_tokens.c.token_hash == token_hash)
    )
    row = (await conn.execute(query)).first()
    if row is None:
        return None
    values = dict(row._mapping)
    expires_at: datetime = values.pop("link_expires_at")
    return SubscriptionRow(**values), expires_at


async def forget(conn: AsyncConnection, subscription_id: int) -> None:
    """Drop every link of a subscription (a revive asks afresh: old links do not apply)."""
    await conn.execute(
        delete(confirmation_tokens).where(confirmation_tokens.c.subscription_id == subscription_id)
    )
