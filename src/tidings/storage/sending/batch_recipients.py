"""The recipient read of a claimed batch (SND-9, AUD-4): its rows in position order, with the
consent rule evaluated per row in SQL, made in the claiming transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Boolean, and_, func, null, select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.consent import mailable
from tidings.storage.tables import campaign_recipients, subscribers, subscriptions


class RecipientRow(NamedTuple):
    """A recipient as loaded for sending. `subscriber_id` is None after a privacy delete.
    A NamedTuple, as the other values built per recipient on the send path: a frozen
    dataclass costs four times as much to build, and a batch builds thousands."""

    id: int
    state: str
    subscriber_id: int | None
    email: str | None
    name: str | None
    subscriber_created_at: datetime | None
    subscription_id: int | None
    subscription_created_at: datetime | None
    mailable: bool
    # Consent to per-person tracking (ENG-1): only then may a per_person message name them.
    tracking_consent_at: datetime | None
    attributes: dict[str, Any] | None  # custom fields for `{{ attribs.KEY }}` (AUD-12)


async def load(
    conn: AsyncConnection, batch_id: int, newsletter_id: int, *, attributes: bool = True
) -> list[RecipientRow]:
    """The batch's recipients in position order, with AUD-4's consent rule evaluated per row
    in SQL (set-based, the same definition selection used). No row is locked: unsubscribe
    never waits on a send (AUD-7). With `attributes` False each row's custom fields are None,
    not read nor decoded (a segment with no `{{ attribs.… }}` slot)."""
    query = (
        select(
            campaign_recipients.c.id,
            campaign_recipients.c.state,
            campaign_recipients.c.subscriber_id,
            subscribers.c.email,
            subscribers.c.name,
            subscribers.c.created_at.label("subscriber_created_at"),
            subscriptions.c.id.label("subscription_id"),
            subscriptions.c.created_at.label("subscription_created_at"),
            func.coalesce(
                and_(subscriptions.c.id.is_not(None), mailable()), False, type_=Boolean()
            ).label("mailable"),
            subscribers.c.tracking_consent_at,
            subscribers.c.attributes if attributes else null().label("attributes"),
        )
        .select_from(campaign_recipients)
        .outerjoin(subscribers, subscribers.c.id == campaign_recipients.c.subscriber_id)
        .outerjoin(
            subscriptions,
            and_(
                subscriptions.c.subscriber_id == subscribers.c.id,
                subscriptions.c.newsletter_id == newsletter_id,
            ),
        )
        .where(campaign_recipients.c.batch_id == batch_id)
        .order_by(campaign_recipients.c.position)
    )
    # Positional: the columns are selected in the tuple's field order (the hot path reads
    # 1,000 rows per batch; building a mapping per row cost more than the query).
    return [RecipientRow._make(row) for row in await conn.execute(query)]
