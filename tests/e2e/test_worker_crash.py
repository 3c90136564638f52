"""A worker killed mid-job (SIGKILL) loses nothing: the job is reclaimed after the lease and
completed exactly once (DLV-2)."""

import asyncio
import os
import signal
import sys
from pathlib import Path

from tests.support.queue_policy import policy
from tests.support.waiting import wait_for
from tidings.bootstrap import utcnow
from tidings.domain.jobs import JobStatus
from tidings.queue.job import Job
from tidings.queue.policy import HandlerRegistry
from tidings.queue.service import JobQueue
from tidings.storage import migrate
from tidings.storage.database import create_database

LEASE_SECONDS = 1.5


async def test_killed_worker_job_is_reclaimed_and_completed_once(
    database_url: str, tmp_path: Path
) -> None:
    """A worker killed mid-job loses nothing: the lease expires and another completes it once."""
    db = create_database(database_url)
    await migrate.upgrade(db)
    queue = JobQueue(
        db,
        policy(lease_seconds=LEASE_SECONDS, poll_interval_seconds=0.05),
        utcnow,
    )
    async with db.write() as conn:
        job, _ = await queue.enqueue(conn, "sleepy", "crash-1", {})
    marker = tmp_path / "started.txt"
    support = Path(__file__).parents[1] / "support" / "sleepy_worker.py"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(support),
        database_url,
        str(marker),
        str(LEASE_SECONDS),
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    try:

        async def started() -> bool:
            assert process.returncode is None, "the worker process died on its own"
            return marker.exists() and bool(marker.read_text())

        await wait_for(started, message="the worker never started the job")
        os.kill(process.pid, signal.SIGKILL)
        assert await asyncio.wait_for(process.wait(), 10) == -signal.SIGKILL
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()

    claimed, _ = await queue.get(job.id)
    assert claimed.status is JobStatus.RUNNING  # still leased to the dead worker

    completions: list[int] = []

    async def finish(claimed_job: Job) -> None:
        completions.append(claimed_job.attempts)

    registry = HandlerRegistry()
    registry.register("sleepy", finish)
    stop = asyncio.Event()
    task = asyncio.create_task(queue.run_workers(registry, stop))
    try:
        for _ in range(200):
            current, attempts = await queue.get(job.id)
            if current.status is JobStatus.DONE:
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await task
        await db.dispose()
    assert current.status is JobStatus.DONE
    assert completions == [2]  # reclaimed once, after the first claim's lease ran out
    assert [a["outcome"] for a in attempts] == ["done"]
    assert marker.read_text().count("started") == 1
