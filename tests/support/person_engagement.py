"""Rows for engagement tests (ENG-7): a campaign already sent to some people, tracked or not,
and a person's own hits, written directly so a test can place them anywhere in time."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.support import rows
from tidings.storage.tables import (
    campaign_batches,
    campaign_links,
    campaign_recipients,
    campaign_sends,
    engagement_person_hits,
)


async def sent_campaign(
    conn: AsyncConnection,
    newsletter_id: int,
    subscriber_ids: Sequence[int],
    *,
    at: datetime,
    tracked: bool = True,
) -> int:
    """A submitted campaign whose send began at `at`, one `sent` recipient row per person;
    `tracked` gives it the open pixel (its links were rewritten)."""
    campaign_id = await rows.campaign(conn, newsletter_id, status="submitted", created_at=at)
    await conn.execute(
        insert(campaign_sends).values(
            campaign_id=campaign_id,
            attempt_started_at=at,
            preflight_email_count=len(subscriber_ids),
            created_at=at,
            updated_at=at,
        )
    )
    if tracked:
        await conn.execute(
            insert(campaign_links).values(
                campaign_id=campaign_id, segment="free", number=0, url="", created_at=at
            )
        )
    batch = insert(campaign_batches).values(
        campaign_id=campaign_id,
        page=1,
        segment="free",
        sending_domain="example.org",
        first_position=1,
        last_position=max(len(subscriber_ids), 1),
        status="submitted",
        recipient_count=len(subscriber_ids),
        created_at=at,
        updated_at=at,
    )
    batch_id = (await conn.execute(batch.returning(campaign_batches.c.id))).scalar_one()
    for position, subscriber_id in enumerate(subscriber_ids, start=1):
        await conn.execute(
            insert(campaign_recipients).values(
                campaign_id=campaign_id,
                batch_id=batch_id,
                subscriber_id=subscriber_id,
                position=position,
                state="sent",
                updated_at=at,
            )
        )
    return campaign_id


async def hit(
    conn: AsyncConnection,
    campaign_id: int,
    subscriber_id: int,
    *,
    at: datetime,
    verdict: str = "human",
    kind: str = "open",
) -> None:
    """One of the person's own hits, as `apply_engagement` records it (per_person)."""
    await conn.execute(
        insert(engagement_person_hits).values(
            campaign_id=campaign_id,
            subscriber_id=subscriber_id,
            segment="free",
            number=0 if kind == "open" else 1,
            kind=kind,
            verdict=verdict,
            reason="test" if verdict == "human" else "privacy_proxy",
            client_family="browser" if verdict == "human" else "apple_mpp",
            at=at,
        )
    )
