"""Sending through a Mailgun-compatible batch API (PRV-2) to the dev provider over loopback:
one call per batch with each reader's variables and Message-ID, and every failure class of
the provider mapped onto the recipients' states (SND-11, SND-13)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select, update

from tests.support.sending import (
    batch_provider_settings,
    create_campaign,
    recipient_states,
    registry,
    running,
    studio_with,
    wait_for_campaign_status,
    wait_for_send_status,
)
from tidings.bootstrap import Container
from tidings.devservers.dev_faults import Fault
from tidings.devservers.dev_server import DevProviderServer
from tidings.domain.email_headers import message_id
from tidings.queue import rounds
from tidings.storage.sending import batch_claims as claim_queries
from tidings.storage.tables import campaign_batches, jobs, send_rates, webhook_deliveries

Studio = tuple[httpx.AsyncClient, Container, dict[str, str], DevProviderServer]


@pytest.fixture
async def studio(database_url: str, dev_provider: DevProviderServer) -> AsyncIterator[Studio]:
    settings = batch_provider_settings(database_url, dev_provider.base_url)
    async with studio_with(settings, 100) as (client, container, headers):
        yield client, container, headers, dev_provider


async def _send(studio: Studio) -> int:
    client, _container, headers, _server = studio
    campaign_id = await create_campaign(client, headers)
    response = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
    assert response.status_code == 202, response.text
    return campaign_id


async def test_each_batch_is_one_call_and_each_reader_gets_their_own_message(
    studio: Studio,
) -> None:
    """One request per batch, yet every reader's name, unsubscribe link and Message-ID are
    their own (CMP-3, CMP-4), and the paid version only reaches paid readers."""
    _client, container, _headers, server = studio
    await container.webhooks.create_endpoint("https://hooks.example.org/x", ["campaign.sent"])
    campaign_id = await _send(studio)
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    async with container.db.read() as conn:  # receivers hear about it (DLV-5)
        sent = [row.payload for row in await conn.execute(select(webhook_deliveries))]
    assert [payload["data"]["email_count"] for payload in sent] == [100]
    accepted = server.store.recipients
    assert Counter(r.address for r in accepted) == {
        f"reader-{n}@example.test": 1 for n in range(1, 101)
    }
    assert len(server.store.batches) == 4  # 50 free + 50 paid in pages of 40
    sample = next(r for r in accepted if r.address == "reader-8@example.test")
    assert sample.message_id == message_id(str(campaign_id), sample.address, "mg.example.org")
    assert "Hello Reader 8." in sample.text()
    assert "Members only." in sample.text()  # reader 8 is paid (even numbers)
    unsubscribe = sample.headers()["List-Unsubscribe"]
    # The link names the reader's recipient row: an unsubscribe counts for this campaign.
    assert re.search(r"/unsubscribe/\d+-\d+\.[A-Za-z0-9_-]{32}>", unsubscribe)
    assert "%recipient" not in sample.html()
    assert await recipient_states(container, campaign_id) == {"sent": 100}


async def test_a_lost_answer_leaves_the_batch_uncertain_and_never_resends_it(
    studio: Studio,
) -> None:
    """The provider may have accepted a batch whose answer was lost: resending would mail 40
    readers twice, so it stays `submitting`, its readers `uncertain`, for an operator."""
    _client, container, _headers, server = studio
    await container.webhooks.create_endpoint("https://hooks.example.org/x", ["campaign.failed"])
    server.faults.replace([Fault(action="drop_after_accept", times=1)])
    campaign_id = await _send(studio)
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "failed"
    states = await recipient_states(container, campaign_id)
    assert states["uncertain"] in (10, 40)  # the one batch whose answer was lost
    assert states["sent"] + states["uncertain"] == 100
    assert max(Counter(r.address for r in server.store.recipients).values()) == 1
    send = await container.sends.get_send(campaign_id)
    assert send is not None
    assert send.error_code == "batch_outcome_uncertain"
    assert send.retryable is False
    async with container.db.read() as conn:  # receivers hear about it (DLV-5)
        events = [row.event_type for row in await conn.execute(select(webhook_deliveries))]
    assert events == ["campaign.failed"]


async def test_a_rate_limited_batch_is_retried_and_the_campaign_completes(
    studio: Studio,
) -> None:
    """A 429 is the provider asking to slow down: every worker pauses (the cool-down lives in
    the database), the batch goes back to pending and is sent later, once."""
    _client, container, _headers, server = studio
    server.faults.replace([Fault(action="status", status=429, retry_after="1", times=2)])
    campaign_id = await _send(studio)
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    assert await recipient_states(container, campaign_id) == {"sent": 100}
    assert len(server.store.recipients) == 100
    async with container.db.read() as conn:  # the cool-down was shared through the database
        (row,) = (await conn.execute(select(send_rates))).all()
    assert row.provider == "mailgun"
    assert row.cooldown_until > 0


async def test_a_refused_batch_fails_the_campaign_as_retryable(studio: Studio) -> None:
    """A 400 refuses the request whole: nobody was mailed, so the campaign fails with a reason
    and may be retried once the cause is fixed."""
    _client, container, _headers, server = studio
    server.faults.replace([Fault(action="status", status=400)])
    campaign_id = await _send(studio)
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "failed"
    send = await container.sends.get_send(campaign_id)
    assert send is not None
    assert (send.error_code, send.retryable) == ("batch_failed", True)
    assert send.error is not None
    assert "mailgun refused the batch (400); check the provider settings" in send.error
    assert await recipient_states(container, campaign_id) == {"pending": 100}
    assert server.store.recipients == []


@pytest.mark.parametrize(
    ("status", "cause"),
    [(401, "API key refused, reply 401"), (403, "sending domain not allowed, reply 403")],
)
async def test_a_refused_key_or_domain_pauses_the_send_named(
    studio: Studio, status: int, cause: str
) -> None:
    """A wrong key (401) or a domain the account may not send for (403) refuses the sender,
    not the readers (issue 35 item 9): the send pauses with the API named, nobody fails, and
    resume sends everyone once the settings are right."""
    _client, container, _headers, server = studio
    server.faults.replace([Fault(action="status", status=status)])
    campaign_id = await _send(studio)
    async with running(container, registry(container)):
        await wait_for_send_status(container, campaign_id, "paused")
    problem = (await container.send_status.status(campaign_id)).provider_problem
    assert problem is not None
    assert problem.paused
    assert (problem.provider, problem.error) == ("mailgun", cause)
    assert problem.endpoint == server.base_url.removeprefix("http://").rstrip("/")
    assert await recipient_states(container, campaign_id) == {"pending": 100}
    server.faults.replace([])
    await container.control.resume(campaign_id, actor="test:operator")
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    assert await recipient_states(container, campaign_id) == {"sent": 100}
    assert len(server.store.recipients) == 100


async def test_readers_the_provider_rejects_are_failed_one_by_one(studio: Studio) -> None:
    """Partial acceptance: the refused readers are failed with the code, the rest sent."""
    _client, container, _headers, server = studio
    server.faults.replace([Fault(action="reject", reject_fraction=0.25, reject_status=550)])
    campaign_id = await _send(studio)
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    states = await recipient_states(container, campaign_id)
    assert states["failed"] > 0
    assert states["sent"] + states["failed"] == 100
    send = await container.sends.get_send(campaign_id)
    assert send is not None
    assert (send.email_count, send.failed_count) == (states["sent"], states["failed"])


async def test_a_worker_dying_during_a_batch_call_leaves_it_for_an_operator(
    studio: Studio,
) -> None:
    """A batch whose worker died after marking it handed over may be at the provider: whoever
    reclaims it must not call again (SND-13); its readers are `uncertain`, the rest are sent."""
    _client, container, _headers, server = studio
    campaign_id = await _send(studio)
    async with running(container, registry(container, kinds=("send_campaign",))):
        await wait_for_send_status(container, campaign_id, "submitting")
    async with container.db.write() as conn:
        await container.queue.enqueue(conn, "probe", "probe-dying", {})
    now = container.sending.now()
    async with container.db.write() as conn:  # a worker claims page 1 and starts the call...
        (dying,) = await rounds.claim(
            conn, kinds=["probe"], limit=1, now=now, lease=timedelta(seconds=30)
        )
        batch_id = (
            await conn.execute(select(campaign_batches.c.id).where(campaign_batches.c.page == 1))
        ).scalar_one()
        await claim_queries.claim(conn, batch_id, token=dying.claim_token, now=now)
        await claim_queries.mark_handed_over(conn, batch_id, token=dying.claim_token, at=now)
        # ...and dies: its lease lapses.
        await conn.execute(
            update(jobs).where(jobs.c.id == dying.id).values(locked_until=now - timedelta(1))
        )
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "failed"
    states = await recipient_states(container, campaign_id)
    assert states == {"sent": 60, "uncertain": 40}
    assert len(server.store.recipients) == 60  # page 1 was never sent again
    send = await container.sends.get_send(campaign_id)
    assert send is not None
    assert (send.error_code, send.retryable) == ("batch_outcome_uncertain", False)
