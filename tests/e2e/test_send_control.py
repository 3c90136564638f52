"""Pause, resume and cancel a send in progress (SND-23, PRI-1) with real `tidings worker`
processes and a slow SMTP sink: after a pause nobody is mailed beyond the chunks in flight, a
paused send is never resumed by recovery, resume finishes it in the same attempt with everyone
mailed once, and after a cancel every reader is accounted for (sent or cancelled)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from tests.support.processes import (
    BATCHES_PER_WORKER,
    IN_FLIGHT_CHUNK,
    campaign_ready,
    delivered,
    tail,
    worker_env,
    worker_process,
)
from tests.support.sending import (
    mailed_at_least,
    recipient_states,
    wait_for,
    wait_for_campaign_status,
)
from tidings.bootstrap import Container
from tidings.devservers.sink import Faults
from tidings.domain.jobs import JobStatus
from tidings.storage.sending import interventions
from tidings.storage.tables import campaign_batches

pytestmark = pytest.mark.slow
AUDIENCE = 400
WORKERS = 2
SLOW_DATA = Faults(delay_seconds=0.02, delay_commands=frozenset({"DATA"}))
# On a loaded machine a reply can miss the short deadline of the crash tests (the message is
# then `uncertain`, by design): these tests need no short lease, so give replies more time.
ROOMY = {
    "BULK_EMAIL_BATCH_SIZE": "50",
    "QUEUE_LEASE_SECONDS": "15",
    "EMAIL_SEND_DEADLINE_SECONDS": "10",
    "WEBHOOKS_DEADLINE_SECONDS": "10",
    "MAILGUN_TIMEOUT_SECONDS": "10",
}


async def _quiet(container: Container, campaign_id: int) -> dict[str, int]:
    """Once no batch is held and no send job is due or running: the recipient states."""

    async def settled() -> bool:
        async with container.db.read() as conn:
            held = (
                await conn.execute(
                    select(func.count()).where(
                        campaign_batches.c.campaign_id == campaign_id,
                        campaign_batches.c.status == "submitting",
                    )
                )
            ).scalar_one()
        busy = [
            job
            for kind in ("send_campaign", "send_batch", "finalise_campaign")
            for job in await container.queue.list_jobs(kind=kind)
            if job.status in (JobStatus.PENDING, JobStatus.RUNNING)
        ]
        return held == 0 and not busy

    await wait_for(settled, within_seconds=60)
    return await recipient_states(container, campaign_id)


async def _actions(container: Container, campaign_id: int) -> list[tuple[str, str]]:
    async with container.db.read() as conn:
        rows = await interventions.list_for(conn, campaign_id)
    return [(row.action, row.actor) for row in rows]


async def test_pause_stops_at_the_chunk_in_flight_and_resume_finishes_the_same_attempt(
    database_url: str, tmp_path: Path
) -> None:
    """An operator who pauses a send expects the mail to stop now — not after the batch, not
    after the campaign — and to carry on later without anyone mailed twice or skipped."""
    log = tmp_path / "worker.log"
    async with campaign_ready(database_url, AUDIENCE, faults=SLOW_DATA) as (
        container,
        sink,
        campaign_id,
    ):
        env = worker_env(container.settings.database.url, sink, **ROOMY)
        async with worker_process(env, log=log), worker_process(env, log=log):
            await wait_for(lambda: mailed_at_least(sink, 30), within_seconds=120)
            paused = await container.control.pause(campaign_id, actor="test:operator")
            at_pause = len(sink.messages)
            assert paused.status == "paused"
            states = await _quiet(container, campaign_id)
            after = len(sink.messages)
            # Only the chunks already in flight may finish: one per batch being sent.
            assert after - at_pause <= WORKERS * BATCHES_PER_WORKER * IN_FLIGHT_CHUNK, tail(log)
            assert after < AUDIENCE
            assert set(states) <= {"sent", "pending", "uncertain"}, states
            assert states["sent"] <= len(delivered(sink)) == after
            assert (await container.campaigns.get(campaign_id)).campaign.status == "paused"
            # Neither a sweep (as at boot and every few minutes) nor time resumes it.
            assert await container.send_recovery().sweep() == 0
        async with worker_process(env, log=log):  # a restarted worker sweeps at start
            await _quiet(container, campaign_id)
            assert len(sink.messages) == after
            assert (await container.campaigns.get(campaign_id)).campaign.status == "paused"
            status = await container.send_status.status(campaign_id)
            assert status.status == "paused"
            assert status.eta_seconds is None
            resumed = await container.control.resume(campaign_id, actor="test:operator")
            assert resumed.attempt == paused.attempt == 1
            final = await wait_for_campaign_status(container, campaign_id, within_seconds=180)
        assert final == "submitted", tail(log)
        states = await recipient_states(container, campaign_id)
        assert set(states) <= {"sent", "uncertain"}, states  # uncertain: a reply came late
        assert states["sent"] + states.get("uncertain", 0) == AUDIENCE
        received = delivered(sink)
        assert len(received) >= states["sent"]
        assert set(received.values()) == {1}
        send = await container.sends.get_send(campaign_id)
        assert send is not None
        assert (send.attempt, send.email_count) == (1, states["sent"])
        assert await _actions(container, campaign_id) == [
            ("pause", "test:operator"),
            ("resume", "test:operator"),
        ]


async def test_cancel_mid_send_accounts_for_every_reader(database_url: str, tmp_path: Path) -> None:
    """After a cancel every reader must be either mailed (once) or `cancelled`, and the send's
    totals must say so — nobody lost, nobody left pending for a later surprise send."""
    log = tmp_path / "worker.log"
    async with campaign_ready(database_url, AUDIENCE, faults=SLOW_DATA) as (
        container,
        sink,
        campaign_id,
    ):
        env = worker_env(container.settings.database.url, sink, **ROOMY)
        async with worker_process(env, log=log), worker_process(env, log=log):
            await wait_for(lambda: mailed_at_least(sink, 30), within_seconds=120)
            done = await container.control.cancel(campaign_id, actor="test:operator")
            assert done.status == "cancelled"

            async def closed() -> bool:
                send = await container.sends.get_send(campaign_id)
                return send is not None and send.cancelled_count is not None

            await wait_for(closed, within_seconds=60)
            states = await _quiet(container, campaign_id)
            mailed = len(sink.messages)
        received = delivered(sink)
        assert set(received.values()) == {1}
        assert {"sent", "cancelled"} <= set(states) <= {"sent", "cancelled", "uncertain"}, states
        assert states["sent"] <= len(received) == mailed
        assert states["sent"] + states["cancelled"] + states.get("uncertain", 0) == AUDIENCE
        send = await container.sends.get_send(campaign_id)
        assert send is not None
        assert (send.email_count, send.cancelled_count) == (states["sent"], states["cancelled"])
        assert send.error_code is None  # the accounting checked out
        status = await container.send_status.status(campaign_id)
        assert status.status == "cancelled"
        assert (status.recipients.sent, status.recipients.cancelled) == (
            states["sent"],
            states["cancelled"],
        )
        async with container.db.read() as conn:
            batch_states = set(
                (
                    await conn.execute(
                        select(campaign_batches.c.status).where(
                            campaign_batches.c.campaign_id == campaign_id
                        )
                    )
                ).scalars()
            )
        assert batch_states <= {"submitted", "cancelled"}
        assert await _actions(container, campaign_id) == [("cancel", "test:operator")]
