"""The durable queue: outbox enqueue, exclusive claims, fencing, backoff, dead and replay."""

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from tests.support.clock import Clock
from tests.support.queue_policy import policy
from tidings.bootstrap import utcnow
from tidings.domain.jobs import GiveUp, JobStatus, RetryLater
from tidings.queue import rounds, store
from tidings.queue.job import Job
from tidings.queue.policy import DuplicateHandler, HandlerRegistry
from tidings.queue.service import JobQueue
from tidings.queue.worker import Worker
from tidings.storage.database import Database, create_database
from tidings.storage.tables import job_attempts, jobs

FAST = policy(
    lease_seconds=5,
    poll_interval_seconds=0.05,
    max_attempts=3,
    backoff_base_seconds=0.01,
    backoff_max_seconds=0.05,
    shutdown_grace_seconds=5,
)


async def _enqueue(db: Database, queue: JobQueue, count: int, kind: str = "noop") -> list[Job]:
    async with db.write() as conn:
        return [(await queue.enqueue(conn, kind, f"{kind}-{i}", {"n": i}))[0] for i in range(count)]


async def _outcomes(db: Database) -> list[tuple[int, str]]:
    async with db.read() as conn:
        rows = await conn.execute(select(job_attempts.c.job_id, job_attempts.c.outcome))
        return [(row.job_id, row.outcome) for row in rows]


async def test_enqueue_same_key_twice_returns_the_existing_job(db: Database) -> None:
    """The idempotency key is the dedupe: asking twice must not send twice."""
    queue = JobQueue(db, FAST, Clock())
    async with db.write() as conn:
        first, created = await queue.enqueue(conn, "send_email", "confirm:abc", {"a": 1})
        second, created_again = await queue.enqueue(conn, "send_email", "confirm:abc", {"a": 2})
    assert (created, created_again) == (True, False)
    assert second.id == first.id
    assert second.payload == {"a": 1}
    assert len(await queue.list_jobs()) == 1


async def test_enqueue_rolls_back_with_the_callers_transaction(db: Database) -> None:
    """The outbox (PRI-6): a job exists if and only if the change that caused it committed."""
    queue = JobQueue(db, FAST, Clock())
    with pytest.raises(RuntimeError):
        async with db.write() as conn:
            await queue.enqueue(conn, "send_email", "k", {})
            raise RuntimeError("the caller's change failed")
    assert await queue.list_jobs() == []


async def _claim(db: Database, *, lease_seconds: float, limit: int = 1) -> list[Job]:
    async with db.write() as conn:
        return await rounds.claim(
            conn, kinds=["noop"], limit=limit, now=utcnow(), lease=timedelta(seconds=lease_seconds)
        )


async def _reap(db: Database) -> int:
    async with db.write() as conn:
        return await store.reap_expired(conn, kinds=["noop"], now=utcnow())


async def test_late_worker_write_is_refused_by_the_claim_token(db: Database) -> None:
    """A worker that overran its lease must not overwrite the outcome of the one that reclaimed."""
    queue = JobQueue(db, FAST, utcnow)
    await _enqueue(db, queue, 1)
    (slow,) = await _claim(db, lease_seconds=0.2)
    await asyncio.sleep(0.4)  # the lease runs out on the database's clock
    assert await _reap(db) == 1
    (fresh,) = await _claim(db, lease_seconds=30)
    assert fresh.id == slow.id
    assert fresh.claim_token != slow.claim_token
    assert fresh.attempts == 2
    async with db.write() as conn:
        assert not await rounds.bury(conn, slow, now=utcnow(), error="late")
        assert await rounds.complete(conn, fresh, now=utcnow())
    job, _ = await queue.get(fresh.id)
    assert job.status is JobStatus.DONE
    assert await _outcomes(db) == [(fresh.id, "done")]


async def test_stale_claim_is_reclaimed_while_a_fresh_one_is_left_alone(db: Database) -> None:
    """A dead worker's job is picked up again; a live worker's is not taken from it."""
    queue = JobQueue(db, FAST, utcnow)
    await _enqueue(db, queue, 2)
    (stale,) = await _claim(db, lease_seconds=0.2)
    (live,) = await _claim(db, lease_seconds=30)
    await asyncio.sleep(0.4)  # the first lease has expired, the second has not
    assert await _reap(db) == 1
    reclaimed = await _claim(db, lease_seconds=30, limit=5)
    assert [job.id for job in reclaimed] == [stale.id]
    assert live.id != stale.id
    current, _ = await queue.get(live.id)
    assert (current.status, current.claim_token) == (JobStatus.RUNNING, live.claim_token)


async def test_a_job_on_its_last_attempt_whose_lease_ran_out_is_dead(db: Database) -> None:
    """A job that kills its worker every time (out of memory, a crash) must not loop forever:
    once its last attempt's lease runs out it is dead, visible and replayable."""
    queue = JobQueue(db, FAST, utcnow)
    async with db.write() as conn:
        job, _ = await queue.enqueue(conn, "noop", "noop-once", {}, max_attempts=1)
    await _claim(db, lease_seconds=0.2)
    await asyncio.sleep(0.4)
    assert await _reap(db) == 1
    assert await _claim(db, lease_seconds=30) == []
    current, _ = await queue.get(job.id)
    assert (current.status, current.last_error) == (
        JobStatus.DEAD,
        "lease expired on the final attempt (worker lost)",
    )


async def test_two_workers_never_both_complete_one_job(database_url: str) -> None:
    """Two processes on one database (separate engines) share 120 jobs: each runs exactly once."""
    first, second = create_database(database_url), create_database(database_url)
    from tidings.storage import migrate

    await migrate.upgrade(first)
    runs: list[int] = []

    async def handler(job: Job) -> None:
        runs.append(job.id)
        await asyncio.sleep(0)

    queue = JobQueue(first, FAST, utcnow)
    jobs = await _enqueue(first, queue, 120)
    workers = []
    for database in (first, second):
        registry = HandlerRegistry()
        registry.register("noop", handler, concurrency=8)
        workers.append(Worker(database, registry, FAST, utcnow))
    stop = asyncio.Event()
    tasks = [asyncio.create_task(worker.run(stop)) for worker in workers]
    try:
        for _ in range(400):
            if len(await queue.list_jobs(status=JobStatus.DONE, limit=500)) == len(jobs):
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        await second.dispose()
        await first.dispose()
    assert sorted(runs) == sorted(job.id for job in jobs)
    outcomes = await _outcomes_after(database_url)
    assert sorted(outcomes) == sorted((job.id, "done") for job in jobs)


async def _outcomes_after(database_url: str) -> list[tuple[int, str]]:
    database = create_database(database_url)
    try:
        return await _outcomes(database)
    finally:
        await database.dispose()


async def test_failures_back_off_then_die_and_replay_runs_again(db: Database) -> None:
    """DLV-3: transient failures retry with backoff up to max_attempts, then `dead`, replayable."""
    queue = JobQueue(db, FAST, utcnow)
    (job,) = await _enqueue(db, queue, 1, kind="flaky")
    calls: list[int] = []
    healthy = False

    async def flaky(claimed: Job) -> None:
        calls.append(claimed.attempts)
        if not healthy:
            raise RetryLater("provider temporary failure 451")

    registry = HandlerRegistry()
    registry.register("flaky", flaky)
    worker = Worker(db, registry, FAST, utcnow)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        for _ in range(200):
            current, attempts = await queue.get(job.id)
            if current.status is JobStatus.DEAD:
                break
            await asyncio.sleep(0.02)
        assert current.status is JobStatus.DEAD
        assert calls == [1, 2, 3]
        assert [a["outcome"] for a in attempts] == ["retry", "retry", "dead"]
        assert current.last_error == "provider temporary failure 451"
        dead = await queue.list_jobs(status=JobStatus.DEAD)
        assert [d.id for d in dead] == [job.id]
        healthy = True
        await queue.replay(job.id)
        for _ in range(200):
            current, _ = await queue.get(job.id)
            if current.status is JobStatus.DONE:
                break
            await asyncio.sleep(0.02)
        assert current.status is JobStatus.DONE
    finally:
        stop.set()
        await task


async def test_permanent_failure_and_crash_are_recorded_without_message_text(db: Database) -> None:
    """GiveUp goes straight to dead; an unexpected exception's message (maybe an address) is never
    stored, only its class."""
    queue = JobQueue(db, FAST, utcnow)
    async with db.write() as conn:
        (doomed, _), (crashing, _) = [
            await queue.enqueue(conn, "doomed", "d", {}),
            await queue.enqueue(conn, "crashing", "c", {}),
        ]

    async def give_up(job: Job) -> None:
        raise GiveUp("provider permanent failure 550")

    async def crash(job: Job) -> None:
        raise ValueError("alice@example.com is weird")

    registry = HandlerRegistry()
    registry.register("doomed", give_up)
    registry.register("crashing", crash)
    worker = Worker(db, registry, FAST, utcnow)
    await worker.claim_round()
    await worker.drain(5)
    dead, _ = await queue.get(doomed.id)
    crashed, _ = await queue.get(crashing.id)
    assert (dead.status, dead.attempts) == (JobStatus.DEAD, 1)
    assert crashed.status is JobStatus.PENDING
    assert crashed.last_error == "unexpected ValueError"


async def test_per_kind_concurrency_limit_is_respected(db: Database) -> None:
    """Concurrency limits protect providers and receivers from more than they agreed to take."""
    queue = JobQueue(db, FAST, utcnow)
    await _enqueue(db, queue, 10, kind="limited")
    in_flight, peak = 0, 0
    release = asyncio.Event()

    async def handler(job: Job) -> None:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await release.wait()
        in_flight -= 1

    registry = HandlerRegistry()
    registry.register("limited", handler, concurrency=3)
    worker = Worker(db, registry, FAST, utcnow)
    assert await worker.claim_round() == 3
    assert await worker.claim_round() == 0
    await asyncio.sleep(0.1)  # let the three handlers start and block
    assert in_flight == 3
    release.set()
    await worker.drain(5)
    assert peak == 3


async def test_shutdown_lets_in_flight_work_finish(db: Database) -> None:
    """SIGTERM mid-send: the send completes and is recorded before the worker exits."""
    queue = JobQueue(db, FAST, utcnow)
    (job,) = await _enqueue(db, queue, 1, kind="slow")
    started = asyncio.Event()

    async def slow(claimed: Job) -> None:
        started.set()
        await asyncio.sleep(0.3)

    registry = HandlerRegistry()
    registry.register("slow", slow)
    stop = asyncio.Event()
    task = asyncio.create_task(Worker(db, registry, FAST, utcnow).run(stop))
    await asyncio.wait_for(started.wait(), 5)
    stop.set()
    await asyncio.wait_for(task, 5)
    finished, _ = await queue.get(job.id)
    assert finished.status is JobStatus.DONE


def test_registering_a_second_handler_for_a_kind_is_an_error() -> None:
    """SND-22: two consumers of one kind racing and dropping work is a known failure mode."""
    registry = HandlerRegistry()

    async def handler(job: Job) -> None:
        return None

    registry.register("send_email", handler)
    with pytest.raises(DuplicateHandler):
        registry.register("send_email", handler)


async def test_prune_removes_old_finished_jobs_only(db: Database) -> None:
    """Pruning bounds the table without ever dropping work still to do."""
    clock = Clock()
    queue = JobQueue(db, FAST, clock)
    await _enqueue(db, queue, 3)
    async with db.write() as conn:
        claimed = await rounds.claim(conn, kinds=["noop"], limit=2, now=clock.now, lease=FAST.lease)
        for job in claimed:
            await rounds.complete(conn, job, now=clock.now)
    clock.now += timedelta(days=FAST.retention_days + 1)
    assert await queue.prune_once() == 2
    remaining = await queue.list_jobs()
    assert [job.status for job in remaining] == [JobStatus.PENDING]
    assert await _outcomes(db) == []  # their attempt history went with them


async def test_notify_wakes_an_idle_worker_before_the_poll(database_url: str) -> None:
    """DLV-4: on PostgreSQL a new job is picked up at once, not at the next poll."""
    if not database_url.startswith("postgresql"):
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's; SQLite polls")
    from tidings.storage import migrate

    database = create_database(database_url)
    await migrate.upgrade(database)
    slow_poll = policy(poll_interval_seconds=60, prune_interval_seconds=3600)
    queue = JobQueue(database, slow_poll, utcnow)
    handled = asyncio.Event()

    async def handler(job: Job) -> None:
        handled.set()

    registry = HandlerRegistry()
    registry.register("ping", handler)
    stop = asyncio.Event()
    task = asyncio.create_task(queue.run_workers(registry, stop))
    try:
        await asyncio.sleep(1.0)  # the worker has polled once and is now idle for 60 s
        await _enqueue(database, queue, 1, kind="ping")
        await asyncio.wait_for(handled.wait(), 10)
    finally:
        stop.set()
        await task
        await database.dispose()


async def test_a_job_queued_by_a_handler_starts_without_waiting_for_the_poll(
    database_url: str,
) -> None:
    """A chain of jobs (subscribe request, then its confirmation mail; a batch, then the
    finalise step) must not wait a poll interval at each step on SQLite, which has no NOTIFY:
    work queued in this process wakes this process's worker for its kind."""
    from tidings.storage import migrate

    database = create_database(database_url)
    await migrate.upgrade(database)
    slow_poll = policy(poll_interval_seconds=60, prune_interval_seconds=3600)
    queue = JobQueue(database, slow_poll, utcnow)
    handled = asyncio.Event()

    async def first(job: Job) -> None:
        async with database.write() as conn:
            await queue.enqueue(conn, "second", "second-1", {})

    async def second(job: Job) -> None:
        handled.set()

    registry = HandlerRegistry()
    registry.register("first", first)
    registry.register("second", second)
    stop = asyncio.Event()
    task = asyncio.create_task(queue.run_workers(registry, stop))
    try:
        await asyncio.sleep(1.0)  # both kinds found nothing: the worker idles for 60 s
        await _enqueue(database, queue, 1, kind="first")
        await asyncio.wait_for(handled.wait(), 10)
    finally:
        stop.set()
        await task
        await database.dispose()


async def test_long_job_renews_its_lease_and_stops_when_it_is_lost(db: Database) -> None:
    """A job longer than its lease stays claimed while its worker lives; if another worker takes it
    over anyway, the first stops instead of both carrying on."""
    lease_policy = policy(
        lease_seconds=0.6,
        poll_interval_seconds=0.05,
        backoff_base_seconds=0.01,
        backoff_max_seconds=0.02,
    )
    queue = JobQueue(db, lease_policy, utcnow)
    (long_job,) = await _enqueue(db, queue, 1, kind="long")
    (stolen_job,) = await _enqueue(db, queue, 1, kind="stolen")
    finished: list[str] = []
    cancelled: list[str] = []

    async def long_running(job: Job) -> None:
        await asyncio.sleep(1.5)  # well past one lease; renewal keeps it ours
        finished.append("long")

    async def loses_its_lease(job: Job) -> None:
        async with db.write() as conn:  # another worker's fresh claim replaces our token
            await conn.execute(update(jobs).where(jobs.c.id == job.id).values(claim_token="x" * 32))
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append("stolen")
            raise

    registry = HandlerRegistry()
    registry.register("long", long_running, renew_lease=True)
    registry.register("stolen", loses_its_lease, renew_lease=True)
    worker = Worker(db, registry, lease_policy, utcnow)
    await worker.claim_round()
    await worker.drain(10)
    done, _ = await queue.get(long_job.id)
    assert (done.status, done.attempts, finished) == (JobStatus.DONE, 1, ["long"])
    assert cancelled == ["stolen"]
    still_running, _ = await queue.get(stolen_job.id)
    assert still_running.claim_token == "x" * 32  # the other worker's claim is left intact


async def test_enqueue_with_revive_rearms_a_finished_job_and_leaves_a_live_one(
    db: Database,
) -> None:
    """A stranded step is resumed under its own key (the send sweep): a finished job with
    that key must run again, as one row with its history, while a pending or running one
    must not be doubled or disturbed."""
    clock = Clock()
    queue = JobQueue(db, FAST, clock)

    async def revive() -> tuple[Job, bool]:
        async with db.write() as conn:
            return await queue.enqueue(conn, "noop", "noop-0", {"n": 0}, revive=True)

    async def claim() -> Job:
        async with db.write() as conn:
            (claimed,) = await rounds.claim(
                conn, kinds=["noop"], limit=1, now=clock.now, lease=FAST.lease
            )
            return claimed

    (pending,) = await _enqueue(db, queue, 1)
    assert await revive() == (pending, False)  # pending: left alone
    claimed = await claim()
    running, revived = await revive()
    assert (running.status, running.claim_token, revived) == (
        JobStatus.RUNNING,
        claimed.claim_token,
        False,
    )
    async with db.write() as conn:
        assert await rounds.bury(conn, claimed, now=clock.now, error="gave up")
    clock.advance(timedelta(seconds=1))
    rearmed, revived = await revive()
    assert revived
    assert (rearmed.id, rearmed.status, rearmed.attempts) == (pending.id, JobStatus.PENDING, 0)
    assert rearmed.finished_at is None
    assert abs(rearmed.run_at - utcnow()) < timedelta(seconds=5)  # due now, by the database
    claimed = await claim()
    async with db.write() as conn:
        assert await rounds.complete(conn, claimed, now=clock.now)
    rearmed, revived = await revive()  # a finished (done) job is made due again too
    assert (revived, rearmed.status) == (True, JobStatus.PENDING)
    assert [outcome for _id, outcome in await _outcomes(db)] == ["dead", "done"]
    assert len(await queue.list_jobs()) == 1


async def test_live_keys_match_pending_and_running_jobs_by_key_shape_only(db: Database) -> None:
    """The sweep asks "is any job of this send live?" by key shape; `_` in a kind must not act
    as a wildcard, and a key of another attempt or campaign that shares digits must not match."""
    queue = JobQueue(db, FAST, Clock())
    keys = [
        "send_batch:1:7:1",  # pending: matches
        "send_batch:1:7:11",  # another attempt
        "send_batch:11:7:1",  # another campaign
        "sendXbatch:1:7:1",  # `_` is literal
        "send_batch:1:8:1",  # done: not live
    ]
    async with db.write() as conn:
        for key in keys:
            await queue.enqueue(conn, "send_batch", key, {})
        await conn.execute(
            update(jobs).where(jobs.c.idempotency_key == "send_batch:1:8:1").values(status="done")
        )
        found = await queue.live_keys(conn, kinds=["send_batch"], key_patterns=["send_batch:1:%:1"])
        none = await queue.live_keys(conn, kinds=["send_email"], key_patterns=["send_batch:%"])
    assert (found, none) == (["send_batch:1:7:1"], [])
