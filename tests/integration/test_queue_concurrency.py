"""The queue under many workers and under a wrong worker clock (DLV-2, SPEC §6): at-least-once,
never two live workers on one job, the attempt history complete, leases on the database's
clock."""

import asyncio
import random
from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import pytest
from sqlalchemy import select, text
from structlog.testing import capture_logs

from tests.support.queue_policy import policy
from tidings.bootstrap import utcnow
from tidings.domain.jobs import JobStatus, RetryLater
from tidings.queue import rounds
from tidings.queue.job import Job
from tidings.queue.policy import HandlerRegistry
from tidings.queue.service import JobQueue
from tidings.queue.worker import Worker
from tidings.storage import migrate
from tidings.storage.database import Database, create_database
from tidings.storage.tables import job_attempts

JOBS = 2000
WORKERS = 4
FAILURE_RATE = 0.2
BUSY = policy(
    lease_seconds=30,
    poll_interval_seconds=0.05,
    max_attempts=20,
    backoff_base_seconds=0.01,
    backoff_max_seconds=0.05,
    shutdown_grace_seconds=10,
)


async def _attempt_history(db: Database) -> dict[int, list[tuple[int, str]]]:
    history: dict[int, list[tuple[int, str]]] = defaultdict(list)
    async with db.read() as conn:
        rows = await conn.execute(
            select(job_attempts.c.job_id, job_attempts.c.attempt, job_attempts.c.outcome).order_by(
                job_attempts.c.id
            )
        )
        for row in rows:
            history[row.job_id].append((row.attempt, row.outcome))
    return history


async def test_four_workers_drain_2000_jobs_with_random_failures_each_attempt_once(
    database_url: str,
) -> None:
    """Four workers (separate engines, as separate processes would be) racing over 2,000 jobs
    whose handler fails at random must still run every job to completion, never run one job
    in two places at once, never run one claim twice, and keep one attempt row per run."""
    databases = [create_database(database_url, pool_size=4) for _ in range(WORKERS)]
    await migrate.upgrade(databases[0])
    queue = JobQueue(databases[0], BUSY, utcnow)
    async with databases[0].write() as conn:
        for number in range(JOBS):
            await queue.enqueue(conn, "flaky", f"flaky-{number}", {"n": number})
    chance = random.Random(11)
    runs: list[tuple[int, int, str | None, int]] = []  # job, attempt, token, worker
    running: set[int] = set()
    overlaps: list[int] = []

    def handler_for(worker: int) -> Callable[[Job], Awaitable[None]]:
        async def flaky(job: Job) -> None:
            if job.id in running:
                overlaps.append(job.id)
            running.add(job.id)
            runs.append((job.id, job.attempts, job.claim_token, worker))
            try:
                await asyncio.sleep(chance.uniform(0, 0.003))
                if chance.random() < FAILURE_RATE:
                    raise RetryLater("temporary failure")
            finally:
                running.discard(job.id)

        return flaky

    workers = []
    for number, database in enumerate(databases):
        registry = HandlerRegistry()
        registry.register("flaky", handler_for(number), concurrency=8)
        workers.append(Worker(database, registry, BUSY, utcnow))
    stop = asyncio.Event()
    tasks = [asyncio.create_task(worker.run(stop)) for worker in workers]
    try:
        async with asyncio.timeout(240):
            while await queue.unfinished(["flaky"]):  # noqa: ASYNC110 - a database query
                await asyncio.sleep(0.2)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    try:
        history = await _attempt_history(databases[0])
        done = await queue.list_jobs(status=JobStatus.DONE, limit=JOBS + 1)
    finally:
        for database in databases:
            await database.dispose()

    assert len(done) == JOBS
    assert overlaps == []
    claims = [(job_id, attempt) for job_id, attempt, _token, _worker in runs]
    assert len(claims) == len(set(claims))  # each claim (job, attempt) ran exactly once
    assert len({token for _job, _attempt, token, _worker in runs}) == len(runs)
    assert len({worker for *_rest, worker in runs}) > 1  # the work really was shared
    runs_per_job: dict[int, list[int]] = defaultdict(list)
    for job_id, attempt, _token, _worker in runs:
        runs_per_job[job_id].append(attempt)
    assert set(history) == set(runs_per_job) == {job.id for job in done}
    for job_id, attempts in history.items():
        count = len(attempts)
        assert attempts == [(n, "retry") for n in range(1, count)] + [(count, "done")]
        assert sorted(runs_per_job[job_id]) == list(range(1, count + 1))
    retried = sum(1 for attempts in history.values() if len(attempts) > 1)
    assert retried > JOBS * FAILURE_RATE / 2  # the failures did happen and were retried


async def test_a_worker_whose_clock_is_an_hour_ahead_takes_no_live_job(db: Database) -> None:
    """A worker machine with a wrong clock must not decide that another worker's lease ran
    out, nor start a job scheduled for later: leases and due times are the database's."""
    queue = JobQueue(db, BUSY, utcnow)
    async with db.write() as conn:
        live, _ = await queue.enqueue(conn, "noop", "live", {})
        later, _ = await queue.enqueue(
            conn, "noop", "later", {}, run_at=utcnow() + timedelta(minutes=10)
        )
    async with db.write() as conn:  # a worker with a right clock holds `live`
        (held,) = await rounds.claim(
            conn, kinds=["noop"], limit=5, now=utcnow(), lease=timedelta(seconds=30)
        )
    assert held.id == live.id

    def an_hour_ahead() -> datetime:
        return utcnow() + timedelta(hours=1)

    handled: list[int] = []

    async def record(job: Job) -> None:
        handled.append(job.id)

    registry = HandlerRegistry()
    registry.register("noop", record)
    skewed = JobQueue(db, BUSY, an_hour_ahead)
    stop = asyncio.Event()
    task = asyncio.create_task(skewed.run_workers(registry, stop))
    await asyncio.sleep(1.0)  # many claim rounds, and the reaper's first pass
    assert await skewed.reap_expired(["noop"]) == 0
    stop.set()
    await task

    assert handled == []
    current, _ = await queue.get(live.id)
    assert (current.status, current.claim_token) == (JobStatus.RUNNING, held.claim_token)
    waiting, _ = await queue.get(later.id)
    assert (waiting.status, waiting.attempts) == (JobStatus.PENDING, 0)
    async with db.write() as conn:
        assert await rounds.complete(conn, held, now=utcnow())  # the rightful worker finishes


async def test_a_worker_whose_connection_is_killed_carries_on(database_url: str) -> None:
    """A PostgreSQL restart or failover cuts the connection a worker claims on; the worker
    must open another and go on working, not stall or die."""
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has no server connection to lose")
    db = create_database(database_url)
    await migrate.upgrade(db)
    queue = JobQueue(db, BUSY, utcnow)
    handled: list[str] = []

    async def record(job: Job) -> None:
        handled.append(job.idempotency_key)

    async def enqueue_and_wait(key: str) -> None:
        async with db.write() as conn:
            await queue.enqueue(conn, "noop", key, {})
        async with asyncio.timeout(20):
            while key not in handled:  # noqa: ASYNC110 - the handler runs in this loop
                await asyncio.sleep(0.05)

    registry = HandlerRegistry()
    registry.register("noop", record)
    stop = asyncio.Event()
    with capture_logs() as logs:
        task = asyncio.create_task(queue.run_workers(registry, stop))
        try:
            await enqueue_and_wait("before")
            async with db.write() as conn:  # every other session of this database is cut off
                await conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                )
            await enqueue_and_wait("after")
        finally:
            stop.set()
            await task
            await db.dispose()
    assert handled == ["before", "after"]
    assert "queue.claim_failed" in [entry["event"] for entry in logs]  # it was cut, and noticed
