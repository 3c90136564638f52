"""Named queries for subscriptions: one row per (subscriber, newsletter), revived, never
duplicated (AUD-3)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.consent import is_suppressed, mailable
from tidings.storage.dialect import insert_for
from tidings.storage.tables import newsletters, subscribers, subscriptions


@dataclass(frozen=True, slots=True)
class SubscriptionRow:
    id: int
    subscriber_id: int
    newsletter_id: int
    source: str
    created_at: datetime
    updated_at: datetime
    confirmed_at: datetime | None
    consent_evidence: str | None
    unsubscribed_at: datetime | None
    unsubscribe_count: int
    last_unsubscribed_at: datetime | None
    # The signup's tracking box was ticked; recorded on the subscriber at confirmation (ENG-1).
    tracking_consent_asked_at: datetime | None = None


def _row(row: Any) -> SubscriptionRow:
    return SubscriptionRow(**dict(row._mapping))


async def get(
    conn: AsyncConnection, subscriber_id: int, newsletter_id: int
) -> SubscriptionRow | None:
    query = select(subscriptions).where(
        subscriptions.c.subscriber_id == subscriber_id,
        subscriptions.c.newsletter_id == newsletter_id,
    )
    row = (await conn.execute(query)).first()
    return None if row is None else _row(row)


async def get_by_id(conn: AsyncConnection, subscription_id: int) -> SubscriptionRow | None:
    query = select(subscriptions).where(subscriptions.c.id == subscription_id)
    row = (await conn.execute(query)).first()
    return None if row is None else _row(row)


async def of_subscriber(
    conn: AsyncConnection, subscriber_id: int
) -> list[tuple[SubscriptionRow, str, str]]:
    """The subscriber's subscriptions with each newsletter's slug and name."""
    query = (
        select(subscriptions, newsletters.c.slug, newsletters.c.name.label("newsletter_name"))
        .join(newsletters, newsletters.c.id == subscriptions.c.newsletter_id)
        .where(subscriptions.c.subscriber_id == subscriber_id)
        .order_by(newsletters.c.id)
    )
    found = []
    for row in await conn.execute(query):
        values = dict(row._mapping)
        slug, name = values.pop("slug"), values.pop("newsletter_name")
        found.append((SubscriptionRow(**values), slug, name))
    return found


async def insert_if_absent(conn: AsyncConnection, **values: Any) -> tuple[SubscriptionRow, bool]:
    statement = insert_for(conn, subscriptions).values(**values)
    result = await conn.execute(
        statement.on_conflict_do_nothing(
            index_elements=["subscriber_id", "newsletter_id"]
        ).returning(subscriptions)
    )
    row = result.first()
    if row is not None:
        return _row(row), True
    existing = await get(conn, values["subscriber_id"], values["newsletter_id"])
    assert existing is not None
    return existing, False


async def update_subscription(
    conn: AsyncConnection, subscription_id: int, **values: Any
) -> SubscriptionRow:
    result = await conn.execute(
        update(subscriptions)
        .where(subscriptions.c.id == subscription_id)
        .values(**values)
        .returning(subscriptions)
    )
    return _row(result.one())


async def mark_confirmed(
    conn: AsyncConnection, subscription_id: int, *, evidence: str, now: datetime
) -> SubscriptionRow | None:
    """Record consent once; None when the row is already confirmed or unsubscribed, so two
    concurrent confirmations produce one `subscriber.confirmed` event."""
    result = await conn.execute(
        update(subscriptions)
        .where(
            subscriptions.c.id == subscription_id,
            subscriptions.c.confirmed_at.is_(None),
            subscriptions.c.unsubscribed_at.is_(None),
        )
        .values(confirmed_at=now, consent_evidence=evidence, updated_at=now)
        .returning(subscriptions)
    )
    row = result.first()
    return None if row is None else _row(row)


async def mark_unsubscribed(
    conn: AsyncConnection, subscription_id: int, *, now: datetime
) -> SubscriptionRow | None:
    """Unsubscribe with its history (AUD-7); None when already unsubscribed (idempotent)."""
    result = await conn.execute(
        update(subscriptions)
        .where(subscriptions.c.id == subscription_id, subscriptions.c.unsubscribed_at.is_(None))
        .values(
            unsubscribed_at=now,
            unsubscribe_count=subscriptions.c.unsubscribe_count + 1,
            last_unsubscribed_at=now,
            updated_at=now,
        )
        .returning(subscriptions)
    )
    row = result.first()
    return None if row is None else _row(row)


async def mailable_subscriber_ids(conn: AsyncConnection, newsletter_id: int) -> list[int]:
    """Subscribers of `newsletter_id` who may be mailed now, by the one consent rule (AUD-4)."""
    query = (
        select(subscribers.c.id)
        .join(subscriptions, subscriptions.c.subscriber_id == subscribers.c.id)
        .where(subscriptions.c.newsletter_id == newsletter_id, mailable())
        .order_by(subscribers.c.id)
    )
    return list((await conn.execute(query)).scalars())


async def pending_page(
    conn: AsyncConnection, newsletter_id: int, *, after_id: int, limit: int
) -> list[SubscriptionRow]:
    """Subscriptions of `newsletter_id` waiting for their person's confirmation (neither
    confirmed nor unsubscribed) whose address is not suppressed, by id after `after_id`."""
    query = (
        select(subscriptions)
        .join(subscribers, subscribers.c.id == subscriptions.c.subscriber_id)
        .where(
            subscriptions.c.newsletter_id == newsletter_id,
            subscriptions.c.id > after_id,
            subscriptions.c.confirmed_at.is_(None),
            subscriptions.c.unsubscribed_at.is_(None),
            ~is_suppressed(),
        )
        .order_by(subscriptions.c.id)
        .limit(limit)
    )
    return [_row(row) for row in await conn.execute(query)]
