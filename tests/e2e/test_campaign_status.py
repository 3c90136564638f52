"""The send status over the API (SND-17, SND-18): phase and progress through a real send, read
from the batches only while it runs and from the stored totals once it is submitted, and the
ETA's samples taken from the current attempt's batches, whichever worker finished them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import event, select, update

from tests.factories import make_settings
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    registry,
    running,
    studio_with,
    wait_for_campaign_status,
    wait_for_send_status,
    wait_for_sent,
)
from tidings.bootstrap import Container
from tidings.campaigns.jobs.payloads import FINALISE_CAMPAIGN, SEND_BATCH, SEND_CAMPAIGN
from tidings.storage.tables import campaign_batches, campaign_sends

Studio = tuple[httpx.AsyncClient, Container, dict[str, str]]


@pytest.fixture
async def studio(database_url: str) -> AsyncIterator[Studio]:
    settings = make_settings(database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 20})
    async with studio_with(settings, 60) as found:
        yield found


@contextmanager
def statements(container: Container) -> Iterator[list[str]]:
    """Every SQL statement the container's engine runs inside the block."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    engine = container.db.engine.sync_engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


async def _status(studio: Studio, campaign_id: int) -> dict[str, Any]:
    client, _container, headers = studio
    response = await client.get(f"/api/admin/campaigns/{campaign_id}/status", headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _send(studio: Studio) -> int:
    client, _container, headers = studio
    campaign_id = await create_campaign(client, headers)
    response = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
    assert response.status_code == 202, response.text
    return campaign_id


async def test_status_follows_a_send_from_preparing_to_submitted(studio: Studio) -> None:
    """What the admin polls: preparing while nothing left pending, submitting after, and the
    verified totals at the end, with exclusions counted as processed throughout."""
    client, container, headers = studio
    draft_id = await create_campaign(client, headers, subject="Draft")
    draft = await _status(studio, draft_id)
    assert (draft["status"], draft["phase"], draft["completed"], draft["eta"]) == (
        "draft",
        None,
        0,
        None,
    )
    campaign_id = await _send(studio)
    queued = await _status(studio, campaign_id)
    assert (queued["status"], queued["phase"], queued["completed"], queued["total"]) == (
        "pending",
        "preparing",
        0,
        60,
    )
    assert queued["eta"] is None
    async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
        await wait_for_send_status(container, campaign_id, "submitting")
    prepared = await _status(studio, campaign_id)
    assert (prepared["phase"], prepared["completed"], prepared["total"], prepared["eta"]) == (
        "preparing",
        60,
        60,
        0,
    )
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    done = await _status(studio, campaign_id)
    assert done == {
        "campaign_id": campaign_id,
        "status": "submitted",
        "attempt": 1,
        "phase": None,
        "completed": 60,
        "total": 60,
        "eta": 0,
        "failed_during": None,
        "retryable": False,
        "error_code": None,
        "error": None,
        "recipients": {"sent": 60, "failed": 0, "excluded": 0, "uncertain": 0, "cancelled": 0},
        "provider_problem": None,
        "auto_pause": None,
    }


async def test_status_never_reads_recipients_and_a_submitted_send_not_even_batches(
    studio: Studio,
) -> None:
    """Admins poll the status every second during a million-recipient send: it must cost a
    few statements over the small batch table, never a scan of recipient rows (SND-17)."""
    _client, container, _headers = studio
    campaign_id = await _send(studio)
    unfinalised = registry(container, kinds=(SEND_CAMPAIGN, SEND_BATCH))
    async with running(container, unfinalised):
        await wait_for_send_status(container, campaign_id, "submitting")
        await wait_for_sent(container, campaign_id, 60)
    with statements(container) as active:
        body = await _status(studio, campaign_id)
    assert (body["status"], body["phase"], body["completed"], body["eta"]) == (
        "submitting",
        "submitting",
        60,
        0,
    )
    assert not [s for s in active if "campaign_recipients" in s]
    campaign_reads = [s for s in active if "campaign" in s]
    # the campaign with its send; the batches summed; the ETA's samples (two bounded reads)
    assert len(campaign_reads) == 4
    assert len([s for s in campaign_reads if "campaign_batches" in s]) == 3
    async with running(container, registry(container, kinds=(FINALISE_CAMPAIGN,))):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    with statements(container) as finished:
        body = await _status(studio, campaign_id)
    assert (body["status"], body["completed"], body["recipients"]["sent"]) == (
        "submitted",
        60,
        60,
    )
    assert not [s for s in finished if "campaign_recipients" in s or "campaign_batches" in s]


async def test_eta_is_measured_from_this_attempts_batches_only(studio: Studio) -> None:
    """Batches finished before the attempt started belong to an earlier one: counting them
    would make a retry look fast (or slow) for reasons that no longer hold. Two samples of
    this attempt, from any workers, give the recent rate; before that, the attempt's own
    average does."""
    _client, container, _headers = studio
    campaign_id = await _send(studio)
    async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
        await wait_for_send_status(container, campaign_id, "submitting")
    now = container.sending.now()
    async with container.db.write() as conn:
        started = now - timedelta(seconds=30)
        await conn.execute(
            update(campaign_sends)
            .where(campaign_sends.c.campaign_id == campaign_id)
            .values(attempt_started_at=started)
        )
        batches = (
            await conn.execute(
                select(campaign_batches.c.id, campaign_batches.c.recipient_count)
                .where(campaign_batches.c.campaign_id == campaign_id)
                .order_by(campaign_batches.c.page)
            )
        ).all()
        (first, first_size), (second, second_size) = batches[0], batches[1]
        finished = {first: now - timedelta(seconds=40), second: now - timedelta(seconds=20)}
        for batch_id, at in finished.items():
            await conn.execute(
                update(campaign_batches)
                .where(campaign_batches.c.id == batch_id)
                .values(
                    status="submitted",
                    claimed_at=at,
                    finished_at=at,
                    submitted_count=campaign_batches.c.recipient_count,
                    submission_excluded_count=0,
                    failed_count=0,
                    uncertain_count=0,
                )
            )
    one_sample = await _status(studio, campaign_id)
    assert (one_sample["phase"], one_sample["completed"]) == (
        "submitting",
        first_size + second_size,
    )
    # One sample measures no interval; the attempt's own average does: the second batch's
    # recipients over the 20 s since it was claimed (the batch claimed 40 s ago is an
    # earlier attempt's, and counts for neither).
    remaining = 60 - first_size - second_size
    assert one_sample["eta"] == pytest.approx(remaining * 20 / second_size, rel=0.1)
    async with container.db.write() as conn:
        await conn.execute(
            update(campaign_batches)
            .where(campaign_batches.c.id == first)
            .values(finished_at=now - timedelta(seconds=25))
        )
    two_samples = await _status(studio, campaign_id)
    # Two samples of this attempt now give a recent rate (the second batch's recipients over
    # the 25 s since the first finished), but a phase younger than the window divides by
    # its own average still: the second batch's recipients over the 20 s since its claim.
    assert two_samples["eta"] == pytest.approx(remaining * 20 / second_size, rel=0.1)


async def test_unknown_and_malformed_ids_are_problems(studio: Studio) -> None:
    """PRI-8: the status and recipient listing answer 4xx problems, never a 500."""
    client, _container, headers = studio
    campaign_id = await create_campaign(client, headers)
    cases = [
        ("/api/admin/campaigns/999999/status", 404),
        ("/api/admin/campaigns/0/status", 422),
        ("/api/admin/campaigns/abc/status", 422),
        (f"/api/admin/campaigns/{2**63}/status", 422),
        ("/api/admin/campaigns/999999/recipients?state=failed", 404),
        (f"/api/admin/campaigns/{campaign_id}/recipients", 422),
        (f"/api/admin/campaigns/{campaign_id}/recipients?state=lost", 422),
        (f"/api/admin/campaigns/{campaign_id}/recipients?state=failed&cursor=zz", 422),
        (f"/api/admin/campaigns/{campaign_id}/recipients?state=failed&limit=0", 422),
    ]
    for url, expected in cases:
        response = await client.get(url, headers=headers)
        assert response.status_code == expected, (url, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
