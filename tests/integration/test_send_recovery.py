"""Interrupted sends are resumed through the one send handler (SND-20, SND-22): by the sweep
when their jobs died, at worker start when young enough, never while a job still has them."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import httpx
from sqlalchemy import select, update
from structlog.testing import capture_logs

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.clock import Clock
from tests.support.sending import (
    FAST_QUEUE,
    Relay,
    batch_addresses,
    create_campaign,
    queued_send,
    recipient_states,
    registry,
    running,
    seed,
    wait_for_campaign_status,
    wait_for_send_status,
    workers,
)
from tests.support.waiting import wait_for
from tidings.bootstrap import Container
from tidings.campaigns.jobs.payloads import SEND_BATCH, SEND_CAMPAIGN, SendBatch, SendCampaign
from tidings.domain.jobs import JobStatus
from tidings.outbound.capture import CaptureProvider
from tidings.storage.tables import captured_messages, jobs


async def _send(client: httpx.AsyncClient, headers: dict[str, str], campaign_id: int) -> None:
    response = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
    assert response.status_code == 202, response.text


async def _mailed(container: Container) -> Counter[str]:
    async with container.db.read() as conn:
        rows = await conn.execute(select(captured_messages.c.recipients))
        return Counter(address for (recipients,) in rows for address in recipients)


async def _job(container: Container, key: str) -> tuple[JobStatus, list[str]]:
    job, history = await container.queue.get_by_key(key)
    return job.status, [attempt["outcome"] for attempt in history]


async def test_sweep_resumes_a_send_whose_batch_job_died_and_it_completes(
    database_url: str,
) -> None:
    """SND-22: a send job that ran out of attempts leaves the campaign `submitting` with a
    pending batch and nothing scheduled; without the sweep it would sit there for ever. The
    running workers' sweep hands it back to the send handler, which resends only that batch."""
    relay = Relay()
    settings = make_settings(
        database_url,
        queue=FAST_QUEUE,
        bulk_email={"batch_size": 10, "sweep_interval_seconds": 1},
    )
    async with api_client(settings, email_provider=relay) as (client, container):
        relay.inner = CaptureProvider(container.db, container.clock)
        campaign_id = await queued_send(client, container, 30)
        async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
            await wait_for_send_status(container, campaign_id, "submitting")
        by_batch = await batch_addresses(container, campaign_id)
        stranded = max(by_batch)
        stranded_key = SendBatch(campaign_id, stranded, 1).idempotency_key
        status_when_revived: list[str] = []

        async def batch_job_died() -> bool:
            """The relay is down for that batch until its job has run out of attempts: it is
            back the moment the job is dead, so whichever sweep revives it finds it up (a
            test that restored it after seeing the job dead raced the sweep under load)."""
            if "dead" not in (await _job(container, stranded_key))[1]:
                return False
            campaign = (await container.campaigns.get(campaign_id)).campaign
            status_when_revived.append(campaign.status)
            return True

        relay.unreachable = set(by_batch[stranded])
        relay.recovered = batch_job_died
        with capture_logs() as logs:
            async with workers(container):
                status = await wait_for_campaign_status(container, campaign_id)
        assert status == "submitted"
        assert status_when_revived[0] == "submitting"  # stranded until the sweep came
        assert await recipient_states(container, campaign_id) == {"sent": 30}
        mailed = await _mailed(container)
        assert len(mailed) == 30
        assert set(mailed.values()) == {1}
        # The same job rows were made due again; the submitted batches were left alone.
        status_now, history = await _job(container, stranded_key)
        assert status_now is JobStatus.DONE
        assert {"dead", "done"} <= set(history)
        assert history.count("dead") == 1
        send_history = (await _job(container, SendCampaign(campaign_id, 1).idempotency_key))[1]
        assert send_history == ["done", "done"]  # the first run, and the sweep's resume
        for batch_id in set(by_batch) - {stranded}:
            key = SendBatch(campaign_id, batch_id, 1).idempotency_key
            assert await _job(container, key) == (JobStatus.DONE, ["done"])
    resumed = [e for e in logs if e["event"] == "campaign.send_resumed"]
    assert resumed
    assert {e["campaign_id"] for e in resumed} == {campaign_id}


async def test_boot_recovery_resumes_a_young_interrupted_send_and_leaves_an_old_one(
    database_url: str,
) -> None:
    """SND-20: after an outage, a send from an hour ago should still go out when workers
    come back, but one from yesterday must not surprise readers days late: it is logged
    once and left for an operator, untouched."""
    clock = Clock()
    settings = make_settings(
        database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 20, "resume_max_age": "24h"}
    )
    async with api_client(settings, clock=clock) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 40)
        old = await create_campaign(client, headers, subject="Old news")
        await _send(client, headers, old)
        clock.advance(timedelta(hours=29))
        young = await create_campaign(client, headers, subject="Fresh news")
        await _send(client, headers, young)
        clock.advance(timedelta(hours=1))  # now: `old` began 30 hours ago, `young` one hour
        async with container.db.write() as conn:  # both send jobs ran out of attempts
            await conn.execute(
                update(jobs)
                .where(jobs.c.kind == SEND_CAMPAIGN)
                .values(status="dead", finished_at=clock.now, last_error="worker lost")
            )
        with capture_logs() as logs:
            async with workers(container):
                assert await wait_for_campaign_status(container, young) == "submitted"
        assert (await container.campaigns.get(old)).campaign.status == "pending"
        old_job = await _job(container, SendCampaign(old, 1).idempotency_key)
        assert old_job[0] is JobStatus.DEAD
        assert await recipient_states(container, old) == {}
        assert await recipient_states(container, young) == {"sent": 40}
        mailed = await _mailed(container)
    assert len(mailed) == 40
    assert set(mailed.values()) == {1}
    skipped = [e for e in logs if e["event"] == "campaign.send_not_resumed"]
    assert [(e["campaign_id"], e["age_hours"]) for e in skipped] == [(old, 30.0)]
    assert skipped[0]["log_level"] == "warning"
    resumed = [e for e in logs if e["event"] == "campaign.send_resumed"]
    assert [e["campaign_id"] for e in resumed] == [young]


async def test_a_send_with_any_live_job_of_its_attempt_is_left_alone(database_url: str) -> None:
    """Resuming a send somebody still holds would race its own jobs: a pending or running
    job of the attempt — even one waiting out a backoff — means hands off. Jobs of another
    attempt, or another campaign whose id shares digits, do not count."""
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with api_client(settings) as (client, container):
        campaign_id = await queued_send(client, container, 5)
        recovery = container.send_recovery()
        send_key = SendCampaign(campaign_id, 1).idempotency_key
        original, _ = await container.queue.get_by_key(send_key)
        assert await recovery.sweep() == 0  # its send job is pending

        async def enqueue(step: SendBatch | SendCampaign) -> None:
            async with container.db.write() as conn:
                await container.queue.enqueue(
                    conn, step.kind, step.idempotency_key, step.to_payload()
                )

        async def set_status(kind: str, status: str) -> None:
            async with container.db.write() as conn:
                await conn.execute(
                    update(jobs).where(jobs.c.kind == kind).values(status=status, finished_at=None)
                )

        await set_status(SEND_CAMPAIGN, "dead")
        await enqueue(SendBatch(campaign_id, 7, 1))  # a batch job of this attempt, waiting
        assert await recovery.sweep() == 0
        await set_status(SEND_BATCH, "done")
        await enqueue(SendBatch(campaign_id, 7, 11))  # attempt 11: not this attempt
        await enqueue(SendBatch(campaign_id * 10 + 1, 7, 1))  # campaign 11 (or 21...)
        await enqueue(SendCampaign(campaign_id * 10 + 1, 1))
        assert await recovery.sweep() == 1
        revived, _ = await container.queue.get_by_key(send_key)
        assert (revived.id, revived.status, revived.attempts) == (original.id, "pending", 0)
        assert await recovery.sweep() == 0  # and now it is live again


async def _resumed_before_dispatch(client: httpx.AsyncClient, container: Container) -> int:
    """A send of four readers in two batches, dispatched, paused and resumed, its batch jobs
    queued and its dispatch not yet run again."""
    campaign_id = await queued_send(client, container, 4)
    async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
        await wait_for_send_status(container, campaign_id, "submitting")
    await container.control.pause(campaign_id, actor="test:operator")
    await container.control.resume(campaign_id, actor="test:operator")
    return campaign_id


async def test_a_batch_job_that_runs_between_resume_and_dispatch_waits_for_the_dispatch(
    database_url: str,
) -> None:
    """Resume puts the send back to `pending` and its dispatch revives batch jobs that
    finished, not one running at that moment. A batch job that ran in between and finished
    empty-handed left its batch unsent for good (a flaky auto-pause test showed it): it must
    wait for the dispatch instead, and then the send completes."""
    settings = make_settings(database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 2})
    async with api_client(settings) as (client, container):
        campaign_id = await _resumed_before_dispatch(client, container)
        async with container.db.read() as conn:
            batch_jobs = select(jobs.c.status, jobs.c.updated_at).where(jobs.c.kind == SEND_BATCH)
            before = {row.updated_at for row in await conn.execute(batch_jobs)}

        async def each_batch_job_ran() -> list[str] | None:
            async with container.db.read() as conn:
                rows = (await conn.execute(batch_jobs)).all()
            if any(row.updated_at in before for row in rows):
                return None
            return [str(row.status) for row in rows]

        async with running(container, registry(container, kinds=(SEND_BATCH,))):
            statuses = await wait_for(each_batch_job_ran, within_seconds=30)
        assert len(statuses) == 2
        assert "done" not in statuses  # each waits (pending, or claimed again) for the dispatch
        assert await _mailed(container) == Counter()
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        assert len(await _mailed(container)) == 4


async def test_a_resumed_send_whose_own_job_died_is_left_to_the_sweep(database_url: str) -> None:
    """Batch jobs wait for a resumed send's dispatch only while its own job is alive: with it
    dead they finish, so no job of the attempt is live and the sweep resumes the send,
    instead of batch jobs waiting for a dispatch that will never come."""
    settings = make_settings(database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 2})
    async with api_client(settings) as (client, container):
        campaign_id = await _resumed_before_dispatch(client, container)
        async with container.db.write() as conn:
            await conn.execute(
                update(jobs).where(jobs.c.kind == SEND_CAMPAIGN).values(status="dead")
            )
        batch_jobs = select(jobs.c.status).where(jobs.c.kind == SEND_BATCH)

        async def batch_jobs_finished() -> bool:
            async with container.db.read() as conn:
                return set((await conn.execute(batch_jobs)).scalars()) == {"done"}

        async with running(container, registry(container, kinds=(SEND_BATCH,))):
            await wait_for(batch_jobs_finished, within_seconds=30)
        assert await container.send_recovery().sweep() == 1
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        assert len(await _mailed(container)) == 4
