"""Sending a campaign to its whole audience, every recipient accounted for (SND-1..16)."""

from __future__ import annotations

from collections import Counter
from email import message_from_bytes
from typing import Any

from sqlalchemy import delete, select, update
from structlog.testing import capture_logs

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    recipient_states,
    registry,
    running,
    seed,
    sink_settings,
    wait_for_campaign_status,
    wait_for_send_status,
    workers,
)
from tidings.bootstrap import utcnow
from tidings.devservers.sink import Faults, SmtpSink
from tidings.storage.tables import (
    campaign_batches,
    captured_messages,
    send_rates,
    subscribers,
    subscriptions,
)


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


async def test_send_events_are_stable_and_carry_no_personal_data(database_url: str) -> None:
    """Operators select on event names (SND-16); logs must never hold an address, a name or
    a token (PRI-5), whatever happened to the recipients."""
    settings = make_settings(database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 10})
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 30)
        async with container.db.write() as conn:  # data the preparation cannot send to
            await conn.execute(
                update(subscribers).where(subscribers.c.id == 4).values(email="broken")
            )
        campaign_id = await create_campaign(client, headers)
        await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        with capture_logs() as logs:
            async with running(container, registry(container, kinds=("send_campaign",))):
                await wait_for_send_status(container, campaign_id, "submitting")
            async with container.db.write() as conn:  # after selection: one leaves, one goes
                now = container.sending.now()
                await conn.execute(
                    update(subscriptions)
                    .where(subscriptions.c.subscriber_id == 7)
                    .values(unsubscribed_at=now, unsubscribe_count=1, last_unsubscribed_at=now)
                )
                await conn.execute(delete(subscribers).where(subscribers.c.id == 9))
            async with running(container, registry(container)):
                assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    by_name: dict[str, list[dict[str, Any]]] = {}
    for entry in logs:
        by_name.setdefault(entry["event"], []).append(entry)
    (prepared_out,) = by_name["email.preparation.excluded"]
    assert prepared_out["log_level"] == "error"
    assert (prepared_out["reason"], prepared_out["member_id"]) == ("invalid_address", 4)
    submitted_out = {e["reason"]: e for e in by_name["email.submission.excluded"]}
    assert set(submitted_out) == {"consent_withdrawn", "member_not_found"}
    assert submitted_out["member_not_found"]["log_level"] == "info"
    batches = by_name["email.batch.submitted"]
    assert sum(e["submitted_count"] for e in batches) == 27
    assert sum(e["submission_excluded_count"] for e in batches) == 2
    (verified,) = by_name["email.submission.verified"]
    assert (
        verified["candidate_count"],
        verified["submitted_count"],
        verified["excluded_count"],
    ) == (30, 27, 3)
    for entry in logs:
        assert {"code", "email_id", "reason"} <= set(entry) or not entry["event"].startswith(
            "email."
        )
        text = repr(entry)
        assert "@example.test" not in text
        assert "Reader " not in text
        assert "broken" not in text


async def test_bad_send_requests_get_problems_and_change_nothing(database_url: str) -> None:
    """PRI-8: wrong state, unknown ids, bad times and an audience of nobody are 4xx problems,
    and nothing moves."""
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        campaign_id = await create_campaign(client, headers)
        base = f"/api/admin/campaigns/{campaign_id}"
        cases = [
            ("/api/admin/campaigns/999999/send", None, 404),
            (f"{base}/schedule", {"scheduled_at": "2020-01-01T00:00:00Z"}, 422),
            (f"{base}/schedule", {"scheduled_at": "2030-01-01T00:00:00"}, 422),
            (f"{base}/schedule", {"scheduled_at": "soon"}, 422),
            (f"{base}/schedule", {}, 422),
            (f"{base}/send", None, 409),  # nobody confirmed yet: an empty send is refused
            (f"{base}/schedule", {"scheduled_at": "2030-01-01T00:00:00Z"}, 409),
        ]
        for url, body, expected in cases:
            response = await client.post(url, json=body, headers=headers)
            assert response.status_code == expected, (url, body, response.text)
            assert response.headers["content-type"].startswith("application/problem+json")
        assert (await container.campaigns.get(campaign_id)).campaign.status == "draft"
        assert await container.sends.get_send(campaign_id) is None
        assert await container.queue.list_jobs(kind="send_campaign") == []
        empty = await client.post(f"{base}/send", headers=headers)
        assert empty.json()["code"] == "empty_audience"
        assert "nobody would receive it" in empty.json()["detail"]
        await seed(container, "weekly", 1)
        assert (await client.post(f"{base}/send", headers=headers)).status_code == 202
        again = await client.post(f"{base}/send", headers=headers)
        assert again.status_code == 409
        assert "draft" in again.json()["detail"]
        resume = await client.post(f"{base}/resume", headers=headers)  # not paused
        assert resume.status_code == 409
        assert len(await container.queue.list_jobs(kind="send_campaign")) == 1
        unauthenticated = await client.post(f"{base}/send")
        assert unauthenticated.status_code == 401


async def test_a_configured_send_rate_is_spent_through_the_shared_limiter(
    database_url: str,
) -> None:
    """PRV-5: with a maximum rate, every message takes a permit from the provider's row in
    the database, so all workers together stay under it and a restart does not burst."""
    settings = make_settings(
        database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 20, "send_rate_per_second": 500}
    )
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 40)
        campaign_id = await create_campaign(client, headers)
        await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        async with container.db.read() as conn:
            (row,) = (await conn.execute(select(send_rates))).all()
    assert row.provider == "capture"
    assert row.theoretical_arrival > 0  # permits were reserved from the shared row


async def test_a_message_lost_after_data_is_uncertain_and_never_resent(database_url: str) -> None:
    """SND-13 for SMTP: when the connection drops after DATA the relay may have the message;
    the reader is `uncertain` (counted, listed), never handed over a second time."""
    async with SmtpSink(clock=utcnow, port=0) as sink:
        sink.faults = Faults(disconnect_during_data=True)
        settings = sink_settings(database_url, sink)
        async with api_client(settings) as (client, container):
            headers = await admin_headers(container)
            await create_newsletter(client, headers)
            await seed(container, "weekly", 5)
            campaign_id = await create_campaign(client, headers)
            await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
            async with workers(container):
                assert await wait_for_campaign_status(container, campaign_id) == "submitted"
            assert await recipient_states(container, campaign_id) == {"uncertain": 5}
            send = await container.sends.get_send(campaign_id)
    assert sink.data_commands == 5  # each reader handed over exactly once
    assert send is not None
    assert (send.email_count, send.uncertain_count) == (0, 5)
