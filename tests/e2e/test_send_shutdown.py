"""Real `tidings worker` processes stopped by SIGTERM or SIGINT mid-send (SND-21): they exit 0
within the grace period having abandoned nothing they claimed — no recipient left `sending`, no
batch left `submitting`, no job left `running`, a fully written preparation verified — and a
restarted worker completes the campaign with every reader mailed once."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from sqlalchemy import func, select

from tests.support.processes import campaign_ready, delivered, tail, worker_env, worker_process
from tests.support.sending import recipient_states, wait_for, wait_for_campaign_status
from tidings.bootstrap import Container
from tidings.devservers.sink import Faults, SmtpSink
from tidings.domain.jobs import JobStatus
from tidings.storage.tables import campaign_batches, campaign_recipients

pytestmark = pytest.mark.slow
GRACE_SECONDS = "20"


async def _batches(container: Container, campaign_id: int) -> list[tuple[int, str, int, int]]:
    """(id, status, recipient_count, rows) of every batch of the campaign."""
    rows = (
        select(func.count())
        .where(campaign_recipients.c.batch_id == campaign_batches.c.id)
        .scalar_subquery()
    )
    query = select(
        campaign_batches.c.id, campaign_batches.c.status, campaign_batches.c.recipient_count, rows
    ).where(campaign_batches.c.campaign_id == campaign_id)
    async with container.db.read() as conn:
        return [tuple(row) for row in await conn.execute(query)]  # type: ignore[misc]


async def _nothing_abandoned(container: Container, campaign_id: int) -> dict[str, int]:
    """What a clean stop leaves: no claimed work half-done. Returns the recipient states."""
    states = await recipient_states(container, campaign_id)
    assert "sending" not in states
    assert "uncertain" not in states
    assert "submitting" not in {
        status for _id, status, _count, _rows in await _batches(container, campaign_id)
    }
    assert await container.queue.list_jobs(status=JobStatus.RUNNING) == []
    assert (await container.campaigns.get(campaign_id)).campaign.status != "failed"
    return states


def _env(container: Container, sink: SmtpSink, batch_size: int) -> dict[str, str]:
    return worker_env(
        container.settings.database.url,
        sink,
        BULK_EMAIL_BATCH_SIZE=str(batch_size),
        QUEUE_SHUTDOWN_GRACE_SECONDS=GRACE_SECONDS,
    )


async def _stop(process: asyncio.subprocess.Process, stop_signal: int, log: Path) -> None:
    process.send_signal(stop_signal)
    returncode = await asyncio.wait_for(process.wait(), float(GRACE_SECONDS) + 15)
    assert returncode == 0, tail(log)


async def _restart_and_finish(
    container: Container, sink: SmtpSink, env: dict[str, str], log: Path, campaign_id: int
) -> None:
    """A new worker completes the campaign: every reader `sent` and mailed exactly once."""
    async with worker_process(env, log=log):
        status = await wait_for_campaign_status(container, campaign_id, within_seconds=180)
    assert status == "submitted", tail(log)
    states = await recipient_states(container, campaign_id)
    received = delivered(sink)
    assert set(states) == {"sent"}
    assert len(received) == states["sent"]
    assert set(received.values()) == {1}


async def test_sigterm_during_preparation_keeps_finished_work_and_exits_0(
    database_url: str, tmp_path: Path
) -> None:
    """A deploy that lands while a big audience is being prepared must neither fail the send
    nor leave it half-built: the worker stops taking pages, verifies and saves the preparation
    if every page got written (else hands the send back), exits 0, and the next worker finishes
    the campaign with each reader mailed once."""
    audience = 2_000
    log = tmp_path / "worker.log"
    async with campaign_ready(database_url, audience) as (container, sink, campaign_id):
        env = _env(container, sink, batch_size=10)

        async def preparing() -> bool:
            send = await container.sends.get_send(campaign_id)
            written = await _batches(container, campaign_id)
            return send is not None and send.prepared_at is None and len(written) > 0

        async with worker_process(env, log=log) as process:
            await wait_for(preparing, within_seconds=60)
            await _stop(process, signal.SIGTERM, log)
        await _nothing_abandoned(container, campaign_id)
        send = await container.sends.get_send(campaign_id)
        assert send is not None
        batches = await _batches(container, campaign_id)
        if send.prepared_at is not None:  # every page was written: verified and kept
            assert send.candidate_count == audience
            assert all(count == rows for _id, _status, count, rows in batches)
            assert sum(count for _id, _status, count, _rows in batches) == audience
        else:  # pages were left: handed back, not failed, to be prepared again
            assert (await container.campaigns.get(campaign_id)).campaign.status == "pending"
            pending = await container.queue.list_jobs(kind="send_campaign")
            assert [job.status for job in pending] == [JobStatus.PENDING]
        await _restart_and_finish(container, sink, env, log, campaign_id)
        assert await recipient_states(container, campaign_id) == {"sent": audience}


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_stop_signal_during_submission_settles_every_chunk_and_exits_0(
    database_url: str, tmp_path: Path, stop_signal: int
) -> None:
    """Stopping a worker mid-send must not turn recipients into `uncertain` ones (who are
    never resent) when there was time to finish: the chunks in flight are handed over and
    settled, batches go back to `pending`, the worker exits 0, and a restarted one sends the
    rest — every reader exactly once."""
    audience = 2_000
    log = tmp_path / "worker.log"
    slow_relay = Faults(delay_seconds=0.005)
    async with campaign_ready(database_url, audience, faults=slow_relay) as (
        container,
        sink,
        campaign_id,
    ):
        env = _env(container, sink, batch_size=200)

        async def sending() -> bool:
            return (await recipient_states(container, campaign_id)).get("sent", 0) >= 200

        async with worker_process(env, log=log) as process:
            await wait_for(sending, within_seconds=60)
            await _stop(process, stop_signal, log)
        states = await _nothing_abandoned(container, campaign_id)
        assert 0 < states["sent"] < audience, states
        assert sum(delivered(sink).values()) == states["sent"]  # every handed-over one recorded
        assert (await container.campaigns.get(campaign_id)).campaign.status == "submitting"
        await _restart_and_finish(container, sink, env, log, campaign_id)
        assert await recipient_states(container, campaign_id) == {"sent": audience}
