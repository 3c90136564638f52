"""A person's engagement rows as the applier and the send leave them (ENG-6), written straight
to the tables: a consented person's hits, the `subscriber.engaged` notice, and a sent
recipient row with what was reported about it afterwards."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.tables import (
    campaign_batches,
    campaign_recipients,
    engagement_notices,
    engagement_person_hits,
)


async def add_person_hit(
    conn: AsyncConnection,
    campaign_id: int,
    subscriber_id: int,
    at: datetime,
    *,
    kind: str = "click",
    number: int = 1,
    segment: str = "all",
    verdict: str = "human",
    reason: str = "none",
    client_family: str = "browser",
) -> None:
    await conn.execute(
        insert(engagement_person_hits).values(
            campaign_id=campaign_id,
            subscriber_id=subscriber_id,
            segment=segment,
            number=number,
            kind=kind,
            verdict=verdict,
            reason=reason,
            client_family=client_family,
            at=at,
        )
    )


async def add_notice(
    conn: AsyncConnection, campaign_id: int, subscriber_id: int, at: datetime
) -> None:
    await conn.execute(
        insert(engagement_notices).values(
            campaign_id=campaign_id, subscriber_id=subscriber_id, at=at
        )
    )


async def add_sent_recipient(
    conn: AsyncConnection, campaign_id: int, subscriber_id: int, at: datetime, **outcome: Any
) -> None:
    """A recipient row sent at `at` in a batch of its own; `outcome`: bounced_at,
    bounce_kind, bounce_code, complained_at, unsubscribed_at, delivered_at."""
    batch = await conn.execute(
        insert(campaign_batches)
        .values(
            campaign_id=campaign_id,
            page=subscriber_id,
            segment="all",
            sending_domain="example.org",
            first_position=subscriber_id,
            last_position=subscriber_id,
            status="submitted",
            recipient_count=1,
            created_at=at,
            updated_at=at,
        )
        .returning(campaign_batches.c.id)
    )
    await conn.execute(
        insert(campaign_recipients).values(
            campaign_id=campaign_id,
            batch_id=batch.scalar_one(),
            subscriber_id=subscriber_id,
            position=subscriber_id,
            state="sent",
            updated_at=at,
            **outcome,
        )
    )
