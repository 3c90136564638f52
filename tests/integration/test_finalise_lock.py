"""A finalise step that finds the campaign's status lock busy comes back later (SND-2, SND-14):
the job that queued it may hold the lock a moment longer, and a finalise that simply gave up
would leave the campaign `submitting` for ever."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from sqlalchemy import insert, select, update

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    registry,
    running,
    seed,
    wait_for_campaign_status,
    wait_for_sent,
)
from tidings.campaigns.jobs.payloads import FINALISE_CAMPAIGN, SEND_BATCH, SEND_CAMPAIGN
from tidings.storage.tables import campaign_sends, campaigns, jobs

HOLDER = "h" * 32


async def test_a_finalise_waits_for_a_busy_status_lock_then_closes_the_send(
    database_url: str,
) -> None:
    """While a live job holds the lock the campaign stays `submitting` and its finalise job
    stays due; once the lock is free the same job closes the send as `submitted`."""
    settings = make_settings(database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 20})
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 30)
        campaign_id = await create_campaign(client, headers)
        await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        async with running(container, registry(container, kinds=(SEND_CAMPAIGN, SEND_BATCH))):
            await wait_for_sent(container, campaign_id, 30)
        now = container.sending.now()
        async with container.db.write() as conn:  # a live job holds the lock
            await conn.execute(
                insert(jobs).values(
                    kind="holder",
                    idempotency_key="holder",
                    payload={},
                    status="running",
                    max_attempts=1,
                    run_at=now,
                    locked_until=now + timedelta(minutes=5),
                    claim_token=HOLDER,
                    created_at=now,
                    updated_at=now,
                )
            )
            await conn.execute(
                update(campaign_sends)
                .where(campaign_sends.c.campaign_id == campaign_id)
                .values(lock_token=HOLDER)
            )
        async with running(container, registry(container, kinds=(FINALISE_CAMPAIGN,))):
            await asyncio.sleep(0.6)
            async with container.db.read() as conn:
                status = (
                    await conn.execute(
                        select(campaigns.c.status).where(campaigns.c.id == campaign_id)
                    )
                ).scalar_one()
                (finalise,) = (
                    await conn.execute(select(jobs).where(jobs.c.kind == FINALISE_CAMPAIGN))
                ).all()
            assert status == "submitting"
            assert finalise.status == "pending"  # deferred, not done
            async with container.db.write() as conn:
                await conn.execute(
                    update(campaign_sends)
                    .where(campaign_sends.c.campaign_id == campaign_id)
                    .values(lock_token=None)
                )
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
