"""Retrying a failed send (SND-19): a new attempt for failed batches and transiently failed
recipients, never for anyone sent, excluded, permanently failed or uncertain; refused, with
nothing changed, while a batch may be at the provider or after a verification failure."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, func, select, update

from tests.factories import make_settings
from tests.support.sending import (
    FAST_QUEUE,
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
from tidings.campaigns.jobs.payloads import SEND_CAMPAIGN
from tidings.devservers.dev_faults import Fault
from tidings.devservers.dev_server import DevProviderServer
from tidings.storage.sending import interventions
from tidings.storage.tables import (
    campaign_batches,
    campaign_recipients,
    campaigns,
    captured_messages,
    jobs,
)

Studio = tuple[httpx.AsyncClient, Container, dict[str, str]]


@pytest.fixture
async def batch_studio(
    database_url: str, dev_provider: DevProviderServer
) -> AsyncIterator[tuple[httpx.AsyncClient, Container, dict[str, str], DevProviderServer]]:
    settings = batch_provider_settings(database_url, dev_provider.base_url)
    async with studio_with(settings, 100) as (client, container, headers):
        yield client, container, headers, dev_provider


@pytest.fixture
async def studio(database_url: str) -> AsyncIterator[Studio]:
    settings = make_settings(database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 20})
    async with studio_with(settings, 60) as found:
        yield found


async def _send(client: httpx.AsyncClient, headers: dict[str, str]) -> int:
    campaign_id = await create_campaign(client, headers)
    response = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
    assert response.status_code == 202, response.text
    return campaign_id


async def _snapshot(container: Container, campaign_id: int) -> dict[str, Any]:
    """Everything a refused retry must leave as it was."""
    async with container.db.read() as conn:
        status = (
            await conn.execute(select(campaigns.c.status).where(campaigns.c.id == campaign_id))
        ).scalar_one()
        batches = (
            await conn.execute(
                select(campaign_batches.c.id, campaign_batches.c.status)
                .where(campaign_batches.c.campaign_id == campaign_id)
                .order_by(campaign_batches.c.id)
            )
        ).all()
        job_count = (await conn.execute(select(func.count()).select_from(jobs))).scalar_one()
    send = await container.sends.get_send(campaign_id)
    assert send is not None
    return {
        "status": status,
        "batches": batches,
        "recipients": await recipient_states(container, campaign_id),
        "attempt": send.attempt,
        "error_code": send.error_code,
        "jobs": job_count,
    }


async def test_retry_after_a_refused_batch_completes_with_every_reader_mailed_once(
    batch_studio: tuple[httpx.AsyncClient, Container, dict[str, str], DevProviderServer],
) -> None:
    """The provider refused one batch (a 400, its cause fixed since; a wrong key pauses the
    send instead): the retry sends exactly that batch in a new attempt, and nobody already
    mailed gets a second copy."""
    client, container, headers, server = batch_studio
    server.faults.replace([Fault(action="status", status=400, times=1)])
    campaign_id = await _send(client, headers)
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "failed"
    status = (
        await client.get(f"/api/admin/campaigns/{campaign_id}/status", headers=headers)
    ).json()
    assert (status["error_code"], status["retryable"], status["failed_during"]) == (
        "batch_failed",
        True,
        "submitting",
    )
    assert status["completed"] < status["total"] == 100
    mailed_first = len(server.store.recipients)
    assert 0 < mailed_first < 100
    response = await client.post(f"/api/admin/campaigns/{campaign_id}/retry", headers=headers)
    assert response.status_code == 202, response.text
    queued = response.json()
    # The number reported is the number the attempt sends to: the refused batch's readers.
    assert (queued["attempt"], queued["batches_requeued"], queued["recipients_requeued"]) == (
        2,
        1,
        100 - mailed_first,
    )
    pending = (
        await client.get(f"/api/admin/campaigns/{campaign_id}/status", headers=headers)
    ).json()
    assert (pending["status"], pending["phase"], pending["eta"]) == ("pending", "submitting", None)
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    assert Counter(r.address for r in server.store.recipients) == {
        f"reader-{n}@example.test": 1 for n in range(1, 101)
    }
    assert await recipient_states(container, campaign_id) == {"sent": 100}
    final = (await client.get(f"/api/admin/campaigns/{campaign_id}/status", headers=headers)).json()
    assert (final["status"], final["attempt"], final["recipients"]["sent"]) == ("submitted", 2, 100)
    async with container.db.read() as conn:
        (audit,) = await interventions.list_for(conn, campaign_id)
    assert (audit.action, audit.attempt, audit.actor[:6]) == ("retry", 2, "admin:")
    assert audit.recipient_count == 100 - mailed_first


async def test_retry_sends_failed_batches_and_transient_failures_and_nobody_else(
    studio: Studio,
) -> None:
    """Only a reader the provider deferred, or whose batch never went out, may be sent again:
    a permanent rejection resent is a bounce, an uncertain or sent reader a duplicate."""
    client, container, headers = studio
    campaign_id = await _send(client, headers)
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    async with container.db.write() as conn:  # what a troubled send would have left
        ids = list(
            (
                await conn.execute(
                    select(campaign_recipients.c.id)
                    .where(campaign_recipients.c.campaign_id == campaign_id)
                    .order_by(campaign_recipients.c.id)
                )
            ).scalars()
        )
        changes = {
            ids[0]: ("failed", "smtp_temporary_451"),
            ids[1]: ("failed", "smtp_deferred_452"),
            ids[2]: ("failed", "smtp_permanent_550"),
            ids[3]: ("uncertain", "in_flight_at_crash"),
            ids[4]: ("excluded", "consent_withdrawn"),
        }
        for recipient_id, (state, reason) in changes.items():
            await conn.execute(
                update(campaign_recipients)
                .where(campaign_recipients.c.id == recipient_id)
                .values(state=state, reason=reason)
            )
        failed_batch = (
            await conn.execute(
                select(campaign_batches.c.id)
                .where(campaign_batches.c.campaign_id == campaign_id)
                .order_by(campaign_batches.c.page.desc())
                .limit(1)
            )
        ).scalar_one()
        await conn.execute(
            update(campaign_batches)
            .where(campaign_batches.c.id == failed_batch)
            .values(status="failed", error_code="provider_refused")
        )
        await conn.execute(  # its readers were never handed over
            update(campaign_recipients)
            .where(campaign_recipients.c.batch_id == failed_batch)
            .values(state="pending")
        )
        never_sent = (
            await conn.execute(
                select(func.count()).where(campaign_recipients.c.batch_id == failed_batch)
            )
        ).scalar_one()
        await conn.execute(
            update(campaigns).where(campaigns.c.id == campaign_id).values(status="failed")
        )
        await conn.execute(delete(captured_messages))
    response = await client.post(f"/api/admin/campaigns/{campaign_id}/retry", headers=headers)
    assert response.status_code == 202, response.text
    # The number it reports is the number it sends to: the failed batch and the two.
    assert response.json()["recipients_requeued"] == never_sent + 2
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    async with container.db.read() as conn:
        captured = (
            await conn.execute(select(func.count()).select_from(captured_messages))
        ).scalar_one()
        rows = {
            row.id: (row.state, row.reason)
            for row in await conn.execute(
                select(campaign_recipients).where(campaign_recipients.c.id.in_(list(changes)))
            )
        }
    assert captured == never_sent + 2  # the failed batch and the two transient failures
    assert rows[ids[0]] == ("sent", None)
    assert rows[ids[1]] == ("sent", None)
    assert rows[ids[2]] == ("failed", "smtp_permanent_550")
    assert rows[ids[3]] == ("uncertain", "in_flight_at_crash")
    assert rows[ids[4]] == ("excluded", "consent_withdrawn")


async def test_retry_is_refused_while_a_batch_is_submitting_and_changes_nothing(
    batch_studio: tuple[httpx.AsyncClient, Container, dict[str, str], DevProviderServer],
) -> None:
    """The provider may have accepted the batch whose answer was lost: a retry could mail
    its readers twice, so it is refused, naming the batch and the reconcile that decides it."""
    client, container, headers, server = batch_studio
    server.faults.replace([Fault(action="drop_after_accept", times=1)])
    campaign_id = await _send(client, headers)
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "failed"
    before = await _snapshot(container, campaign_id)
    assert before["error_code"] == "batch_outcome_uncertain"
    response = await client.post(f"/api/admin/campaigns/{campaign_id}/retry", headers=headers)
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "retry_refused"
    (stuck,) = problem["batch_ids"]
    assert f"{stuck}" in problem["detail"]
    assert "reconcile" in problem["detail"]
    status = (
        await client.get(f"/api/admin/campaigns/{campaign_id}/status", headers=headers)
    ).json()
    assert status["retryable"] is False
    assert await _snapshot(container, campaign_id) == before


async def test_retry_is_refused_after_a_verification_failure(studio: Studio) -> None:
    """SND-15: counts that do not add up are terminal; a retry would fail the same way (or
    worse, send with wrong accounting), so it is refused and nothing moves."""
    client, container, headers = studio
    campaign_id = await _send(client, headers)
    async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
        await wait_for_send_status(container, campaign_id, "submitting")
    async with container.db.write() as conn:  # a recipient row vanished after preparation
        victim = (
            await conn.execute(
                select(func.min(campaign_recipients.c.id)).where(
                    campaign_recipients.c.campaign_id == campaign_id
                )
            )
        ).scalar_one()
        await conn.execute(delete(campaign_recipients).where(campaign_recipients.c.id == victim))
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "failed"
    before = await _snapshot(container, campaign_id)
    assert before["error_code"] == "recipient_verification_failed"
    response = await client.post(f"/api/admin/campaigns/{campaign_id}/retry", headers=headers)
    assert response.status_code == 400
    assert response.json()["code"] == "retry_refused"
    assert "verification" in response.json()["detail"]
    assert await _snapshot(container, campaign_id) == before


async def test_retry_of_anything_but_a_failed_send_is_refused(studio: Studio) -> None:
    """A draft was never sent and a submitted send is done: only `failed` can be retried;
    unknown and malformed ids are problems too, never a 500."""
    client, container, headers = studio
    draft = await create_campaign(client, headers)
    sent = await _send(client, headers)
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, sent) == "submitted"
    for campaign_id, expected in ((draft, 400), (sent, 400), (999999, 404)):
        response = await client.post(f"/api/admin/campaigns/{campaign_id}/retry", headers=headers)
        assert response.status_code == expected, response.text
        assert response.headers["content-type"] == "application/problem+json"
    for bad in ("0", "abc", str(2**63)):
        response = await client.post(f"/api/admin/campaigns/{bad}/retry", headers=headers)
        assert response.status_code == 422
    assert (await client.get(f"/api/admin/campaigns/{sent}/status", headers=headers)).json()[
        "attempt"
    ] == 1
