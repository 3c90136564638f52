"""Shutdown mid-send (SND-21), in-process with the stop landing at an exact point: preparation
stops taking pages but keeps finished work, submission finishes its chunk and gives the batch
back, and nothing is left `sending` or failed. Real processes: tests/e2e/test_send_shutdown.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from sqlalchemy import select

from tests.factories import api_client, make_settings
from tests.support.sending import (
    FAST_QUEUE,
    Relay,
    queued_send,
    recipient_states,
    registry,
    running,
    wait_for_campaign_status,
    wait_for_send_status,
)
from tidings.bootstrap import Container
from tidings.campaigns.jobs.payloads import SEND_BATCH, SEND_CAMPAIGN, SendCampaign
from tidings.domain.jobs import JobStatus
from tidings.outbound.capture import CaptureProvider
from tidings.queue.job import Job
from tidings.storage.sending import batch_pages as page_queries
from tidings.storage.sending.campaign_sends import SendRow
from tidings.storage.tables import campaign_batches, captured_messages

READERS = 30  # 15 free and 15 paid, in pages of 10: four batches
CHUNK = 5  # recipients handed over together


@asynccontextmanager
async def studio(
    database_url: str, *, page_concurrency: int
) -> AsyncIterator[tuple[Container, Relay, int]]:
    """A campaign to READERS confirmed readers, queued; the relay a double (the world outside)."""
    relay = Relay()
    settings = make_settings(
        database_url,
        queue=FAST_QUEUE,
        bulk_email={
            "batch_size": 10,
            "batch_creation_concurrency": page_concurrency,
            "in_flight_chunk": CHUNK,
        },
    )
    async with api_client(settings, email_provider=relay) as (client, container):
        relay.inner = CaptureProvider(container.db, container.clock)
        yield container, relay, await queued_send(client, container, READERS)


async def run_until_stopped(container: Container, handlers: Any, stop: asyncio.Event) -> None:
    """Run `handlers` until something sets `stop` (SIGTERM, as it were); returns once they
    drained, as `tidings worker` does before it exits."""
    await asyncio.wait_for(container.queue.run_workers(handlers, stop), 60)


async def prepare_with_stop_in_first_page(
    container: Container, monkeypatch: pytest.MonkeyPatch, campaign_id: int
) -> tuple[SendRow, Job, list[str]]:
    """Run the send job with the signal landing while the first page's transaction is being
    written, until the workers drained. Returns the send record and the send job with the
    outcomes of its attempts."""
    stop = asyncio.Event()
    original = page_queries.create_page_batch

    async def stop_then_write(*args: Any, **kwargs: Any) -> Any:
        stop.set()
        return await original(*args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(page_queries, "create_page_batch", stop_then_write)
        await run_until_stopped(container, registry(container, kinds=(SEND_CAMPAIGN,)), stop)
    send = await container.sends.get_send(campaign_id)
    assert send is not None
    job, history = await container.queue.get_by_key(SendCampaign(campaign_id, 1).idempotency_key)
    return send, job, [attempt["outcome"] for attempt in history]


async def batch_statuses(container: Container, campaign_id: int) -> list[str]:
    query = select(campaign_batches.c.status).where(campaign_batches.c.campaign_id == campaign_id)
    async with container.db.read() as conn:
        return sorted(str(status) for status in (await conn.execute(query)).scalars())


async def mailed(container: Container) -> list[str]:
    async with container.db.read() as conn:
        rows = list(await conn.execute(select(captured_messages.c.recipients)))
    return [address for (recipients,) in rows for address in recipients]


async def finish_and_check_everyone_mailed_once(container: Container, campaign_id: int) -> None:
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    assert await recipient_states(container, campaign_id) == {"sent": READERS}
    addresses = await mailed(container)
    assert len(addresses) == len(set(addresses)) == READERS


async def test_shutdown_with_every_page_in_flight_verifies_and_keeps_the_preparation(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SND-21: the signal stops new pages, not finished work. Every page was already taken
    when it landed, so they all finish, the preparation is verified and `prepared_at` saved:
    the work is kept and the next run reuses it rather than selecting the audience again."""
    async with studio(database_url, page_concurrency=4) as (container, _relay, campaign_id):
        send, job, history = await prepare_with_stop_in_first_page(
            container, monkeypatch, campaign_id
        )
        assert send.prepared_at is not None
        assert (send.candidate_count, send.preparation_excluded_count) == (READERS, 0)
        assert await batch_statuses(container, campaign_id) == ["pending"] * 4
        assert await recipient_states(container, campaign_id) == {"pending": READERS}
        assert (job.status, history) == (JobStatus.DONE, ["done"])
        await finish_and_check_everyone_mailed_once(container, campaign_id)


async def test_shutdown_with_pages_left_hands_the_send_back_without_failing_it(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SND-21: pages not yet started are not started. The send is not failed and no attempt
    is spent: its job is due again at once, and the next run discards the partial pages and
    prepares from the start (SND-8), so nobody is lost or mailed twice."""
    async with studio(database_url, page_concurrency=1) as (container, _relay, campaign_id):
        send, job, history = await prepare_with_stop_in_first_page(
            container, monkeypatch, campaign_id
        )
        assert send.prepared_at is None
        assert (await container.campaigns.get(campaign_id)).campaign.status == "pending"
        assert await batch_statuses(container, campaign_id) == ["pending"]  # the one page
        assert (job.status, job.attempts, history) == (JobStatus.PENDING, 0, [])
        await finish_and_check_everyone_mailed_once(container, campaign_id)


async def test_shutdown_mid_batch_settles_the_chunk_in_hand_and_gives_the_batch_back(
    database_url: str,
) -> None:
    """SND-21: a batch being handed over finishes the chunk in flight, records every outcome,
    and starts no new chunk; the batch goes back to `pending` for the next run. Nobody is
    left `sending`, so nobody becomes `uncertain` and nobody is mailed twice."""
    async with studio(database_url, page_concurrency=2) as (container, relay, campaign_id):
        async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
            await wait_for_send_status(container, campaign_id, "submitting")

        stop = asyncio.Event()

        def stop_at_the_seventh(handed_over: int) -> None:
            if handed_over == 6:
                stop.set()

        relay.before_send = stop_at_the_seventh
        await run_until_stopped(container, registry(container, kinds=(SEND_BATCH,)), stop)
        states = await recipient_states(container, campaign_id)
        assert set(states) == {"sent", "pending"}
        assert states["sent"] % CHUNK == 0  # whole chunks only
        assert len(await mailed(container)) == states["sent"]
        assert "submitting" not in await batch_statuses(container, campaign_id)
        batch_jobs = await container.queue.list_jobs(kind=SEND_BATCH)
        handed_back = [job for job in batch_jobs if job.status is JobStatus.PENDING]
        assert handed_back
        assert all(job.attempts == 0 for job in handed_back)  # no attempt spent
        assert (await container.campaigns.get(campaign_id)).campaign.status == "submitting"
        relay.before_send = None
        await finish_and_check_everyone_mailed_once(container, campaign_id)
