"""The queue as the rest of tidings sees it: enqueue inside a caller's transaction, inspect,
replay, and run workers with pruning, the expired-lease reaper and wake-ups."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import Select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.errors import Conflict, NotFound
from tidings.domain.jobs import ClaimLost, JobStatus
from tidings.queue import store
from tidings.queue.job import Job
from tidings.queue.listener import listen_for_jobs
from tidings.queue.policy import HandlerRegistry, QueuePolicy
from tidings.queue.worker import Worker
from tidings.storage.database import Database
from tidings.storage.errors import unreachable_as_not_ready

log = structlog.get_logger("tidings.queue")
PRUNE_BATCH = 1000


@dataclass(frozen=True, slots=True)
class Periodic:
    """A task the workers run at start and then every `interval_seconds` until they stop
    (the send sweep). It returns how many things it did, for the log."""

    name: str
    interval_seconds: float
    run: Callable[[], Awaitable[int]]


class JobQueue:
    def __init__(self, db: Database, policy: QueuePolicy, now: Callable[[], datetime]) -> None:
        self.db = db
        self.policy = policy
        self._now = now
        # Set when this process's workers start shutting down (SIGTERM, SIGINT): long handlers
        # watch it to stop taking new work and hand back what they have not started.
        self.stopping = asyncio.Event()
        # This process's running workers, told of each kind queued here (see `Worker.arm`).
        self._local_workers: list[Worker] = []

    async def enqueue(
        self,
        conn: AsyncConnection,
        kind: str,
        idempotency_key: str,
        payload: dict[str, Any],
        *,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        revive: bool = False,
    ) -> tuple[Job, bool]:
        """Add a job inside the caller's write transaction (PRI-6: the outbox). With `revive`,
        a finished job with the same key is made due again instead (see `store.enqueue`)."""
        queued = await store.enqueue(
            conn,
            kind=kind,
            idempotency_key=idempotency_key,
            payload=payload,
            now=self._now(),
            max_attempts=max_attempts or self.policy.max_attempts,
            run_at=run_at,
            revive=revive,
        )
        self._arm(kind)
        return queued

    async def enqueue_many(self, conn: AsyncConnection, kind: str, rows: Select[Any]) -> int:
        """Add a job per row of `rows` inside the caller's write transaction, in one statement
        (see `store.enqueue_many`: `idempotency_key` and the payload's fields as columns)."""
        added = await store.enqueue_many(
            conn, kind=kind, rows=rows, now=self._now(), max_attempts=self.policy.max_attempts
        )
        if added:
            self._arm(kind)
        return added

    def _arm(self, kind: str) -> None:
        # Before the caller commits: the worker's claim takes the write lock after it (one
        # writer on SQLite); on PostgreSQL a claim that runs first is followed by NOTIFY.
        for worker in self._local_workers:
            worker.arm(kind)

    async def withdraw(self, conn: AsyncConnection, idempotency_key: str) -> int:
        """Remove the still-pending job with this key inside the caller's write transaction
        (a schedule called off); 0 if it is running, finished or gone."""
        return await store.withdraw(conn, idempotency_key=idempotency_key)

    async def live_keys(
        self, conn: AsyncConnection, *, kinds: Sequence[str], key_patterns: Sequence[str]
    ) -> list[str]:
        """Keys of pending or running jobs matching `key_patterns` (`%`: any run)."""
        return await store.live_keys(conn, kinds=kinds, key_patterns=key_patterns)

    @contextlib.asynccontextmanager
    async def fenced(self, job: Job) -> AsyncIterator[AsyncConnection]:
        """A write transaction in which `job`'s claim is verified and held (DLV-2's fenced
        writes). Every write a handler makes about its work goes through here: a worker
        whose job was reclaimed gets `ClaimLost` and its writes are not made."""
        async with self.db.write() as conn:
            if not await store.hold(conn, job):
                raise ClaimLost("the job's claim was lost; another worker owns it now")
            yield conn

    async def get(self, job_id: int) -> tuple[Job, list[dict[str, Any]]]:
        async with self.db.read() as conn:
            job = await store.get(conn, job_id)
            if job is None:
                raise NotFound(f"no job with id {job_id}")
            return job, await store.attempts_of(conn, job_id)

    async def get_by_key(self, idempotency_key: str) -> tuple[Job, list[dict[str, Any]]]:
        async with self.db.read() as conn:
            job = await store.get_by_key(conn, idempotency_key)
            if job is None:
                raise NotFound("no job with that key")
            return job, await store.attempts_of(conn, job.id)

    async def list_jobs(
        self,
        *,
        status: JobStatus | None = None,
        kind: str | None = None,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[Job]:
        async with self.db.read() as conn:
            return await store.list_jobs(
                conn, status=status, kind=kind, before_id=before_id, limit=limit
            )

    async def upcoming(self, limit: int = 50) -> list[Job]:
        """Pending and running jobs, the next due first: what the workers will do."""
        async with self.db.read() as conn:
            return await store.upcoming(conn, limit=limit)

    async def replay(self, job_id: int) -> Job:
        async with self.db.write() as conn:
            replayed = await store.replay(conn, job_id, now=self._now())
            if replayed is None:
                if await store.get(conn, job_id) is None:
                    raise NotFound(f"no job with id {job_id}")
                raise Conflict("the job is running; wait for its outcome before replaying")
        log.info("job.replayed", job_id=job_id)
        return replayed

    async def prune_once(self) -> int:
        cutoff = self._now() - timedelta(days=self.policy.retention_days)
        removed = 0
        while True:
            async with self.db.write() as conn:
                batch = await store.prune(conn, finished_before=cutoff, batch=PRUNE_BATCH)
            removed += batch
            if batch == 0:
                return removed

    async def reap_expired(self, kinds: Sequence[str]) -> int:
        """Release (or bury, on their last attempt) the jobs of `kinds` whose lease ran out
        by the database's clock; returns how many."""
        async with self.db.write() as conn:
            return await store.reap_expired(conn, kinds=list(kinds), now=self._now())

    async def unfinished(self, kinds: Sequence[str]) -> int:
        """How many jobs of `kinds` are pending or running."""
        async with self.db.read() as conn:
            return await store.count_unfinished(conn, kinds=kinds)

    async def depth(self) -> list[tuple[str, str, int, float]]:
        """Jobs per kind and status, read from the rows; `NotReady` if the database is down."""
        with unreachable_as_not_ready():
            async with self.db.read() as conn:
                return await store.depth_by_kind_and_status(conn, now=self._now())

    async def run_workers(
        self,
        registry: HandlerRegistry,
        stop: asyncio.Event,
        *,
        on_outcome: Callable[[str, str], None] | None = None,
        maintenance: Sequence[Callable[[], Awaitable[int]]] = (),
        periodic: Sequence[Periodic] = (),
    ) -> None:
        """Consume every registered kind until `stop`, pruning (and running `maintenance`
        tasks) on an interval, running each `periodic` task at start and on its own interval
        and, on PostgreSQL, waking on NOTIFY. While they run, `stopping` is `stop`: handlers see
        the shutdown as the workers stop claiming. Returns after in-flight work drained."""
        self.stopping = stop
        worker = Worker(self.db, registry, self.policy, self._now, on_outcome=on_outcome)
        self._local_workers.append(worker)
        helpers = [
            asyncio.create_task(listen_for_jobs(self.db, worker.wake, stop)),
            asyncio.create_task(self._prune_loop(stop, maintenance)),
            asyncio.create_task(self._reap_loop(stop, registry.kinds(), worker.wake)),
            *(asyncio.create_task(self._periodic_loop(stop, task)) for task in periodic),
        ]
        try:
            await worker.run(stop)
        finally:
            self._local_workers.remove(worker)
            for helper in helpers:
                helper.cancel()
            for helper in helpers:
                with contextlib.suppress(asyncio.CancelledError):
                    await helper
            self.stopping = asyncio.Event()

    async def _prune_loop(
        self, stop: asyncio.Event, maintenance: Sequence[Callable[[], Awaitable[int]]]
    ) -> None:
        while not stop.is_set():
            try:
                removed = await self.prune_once()
                for task in maintenance:
                    removed += await task()
                if removed:
                    log.info("queue.pruned", removed=removed)
            except Exception as exc:
                log.warning("queue.prune_failed", error_type=type(exc).__name__)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.policy.prune_interval_seconds):
                    await stop.wait()

    async def _reap_loop(
        self, stop: asyncio.Event, kinds: Sequence[str], wake: Callable[[], None]
    ) -> None:
        """The abandoned-job reaper, on its own interval rather than in every claim."""
        while not stop.is_set():
            try:
                if reaped := await self.reap_expired(kinds):
                    log.warning("queue.leases_expired", jobs=reaped)
                    wake()
            except Exception as exc:  # the database may be briefly away: try again next time
                log.warning("queue.reap_failed", error_type=type(exc).__name__)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.policy.reap_interval_seconds):
                    await stop.wait()

    async def _periodic_loop(self, stop: asyncio.Event, task: Periodic) -> None:
        while not stop.is_set():
            try:
                done = await task.run()
                if done:
                    log.info("queue.periodic_ran", task=task.name, count=done)
            except Exception as exc:  # the database may be briefly away: try again next time
                log.warning("queue.periodic_failed", task=task.name, error_type=type(exc).__name__)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(task.interval_seconds):
                    await stop.wait()
