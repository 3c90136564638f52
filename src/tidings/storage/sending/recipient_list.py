"""Named queries for the admin listing of a campaign's recipients by state (SND-13): the
uncertain or failed ones an operator looks up at the provider, a page at a time by id."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.sending import RecipientState
from tidings.storage.tables import campaign_batches, campaign_recipients, subscribers


@dataclass(frozen=True, slots=True)
class ListedRecipient:
    """A recipient row with its address (None after a privacy delete) and its batch's
    sending domain (None for a preparation exclusion): what its Message-ID was made of."""

    id: int
    batch_id: int | None
    subscriber_id: int | None
    address: str | None
    sending_domain: str | None
    state: str
    reason: str | None


async def page(
    conn: AsyncConnection,
    campaign_id: int,
    state: RecipientState,
    *,
    after_id: int | None,
    limit: int,
) -> list[ListedRecipient]:
    recipients = campaign_recipients.c
    query = (
        select(
            recipients.id,
            recipients.batch_id,
            recipients.subscriber_id,
            subscribers.c.email.label("address"),
            campaign_batches.c.sending_domain,
            recipients.state,
            recipients.reason,
        )
        .select_from(campaign_recipients)
        .outerjoin(subscribers, subscribers.c.id == recipients.subscriber_id)
        .outerjoin(campaign_batches, campaign_batches.c.id == recipients.batch_id)
        .where(recipients.campaign_id == campaign_id, recipients.state == state.value)
        .order_by(recipients.id)
        .limit(limit)
    )
    if after_id is not None:
        query = query.where(recipients.id > after_id)
    return [ListedRecipient(**dict(row._mapping)) for row in await conn.execute(query)]
