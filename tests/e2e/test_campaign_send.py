"""Sending a campaign to its whole audience, every recipient accounted for (SND-1..16)."""

from __future__ import annotations

from collections import Counter
from email import message_from_bytes

from sqlalchemy import select

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    recipient_states,
    seed,
    wait_for_campaign_status,
    workers,
)
from tidings.storage.tables import campaign_batches, captured_messages


async def test_campaign_reaches_every_confirmed_subscriber_once(database_url: str) -> None:
    """The product's promise: send to the whole audience, each reader exactly once, with the
    segment's version, and counts verified against the rows."""
    settings = make_settings(database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 100})
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 250)
        campaign_id = await create_campaign(client, headers)
        response = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        assert response.status_code == 202, response.text
        assert response.json()["preflight_email_count"] == 250
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        assert await recipient_states(container, campaign_id) == {"sent": 250}
        send = await container.sends.get_send(campaign_id)
        assert send is not None
        assert send.email_count == 250
        assert send.candidate_count == 250
        async with container.db.read() as conn:
            raw = [row.raw for row in await conn.execute(select(captured_messages.c.raw))]
            segments = [row.segment for row in await conn.execute(select(campaign_batches))]
        recipients = Counter(str(message_from_bytes(data)["To"]) for data in raw)
        assert len(recipients) == 250
        assert set(recipients.values()) == {1}
        # Batches never mix segments: 125 free + 125 paid in pages of 100.
        assert Counter(segments) == {"free": 2, "paid": 2}
        paid = [m for m in raw if b"Members only." in m]
        assert len(paid) == 125
