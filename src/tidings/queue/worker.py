"""The worker loop: claim due jobs per kind within concurrency limits (many per statement),
run their handlers, record outcomes under the claim token (many per transaction), back off on
failure, drain on shutdown (DLV-2..4)."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import Callable
from datetime import datetime

import structlog

from tidings.domain.backoff import is_exhausted, retry_delay
from tidings.domain.jobs import ClaimLost, Defer, GiveUp, RetryLater
from tidings.queue import store
from tidings.queue.connection import RoundConnection
from tidings.queue.job import Job
from tidings.queue.outcomes import OutcomeWriter
from tidings.queue.policy import HandlerRegistry, QueuePolicy, Registration
from tidings.queue.rounds import Outcome, settle_and_claim
from tidings.storage.database import Database

log = structlog.get_logger("tidings.queue")


class Worker:
    """One process's consumer of the job table. Many may run, on many machines."""

    def __init__(
        self,
        db: Database,
        registry: HandlerRegistry,
        policy: QueuePolicy,
        now: Callable[[], datetime],
        *,
        uniform: Callable[[float, float], float] = random.uniform,
        on_outcome: Callable[[str, str], None] | None = None,
    ) -> None:
        self._db = db
        self._registry = registry
        self._policy = policy
        self._now = now
        self._uniform = uniform
        self._on_outcome = on_outcome
        self._running: Counter[str] = Counter()
        self._tasks: set[asyncio.Task[None]] = set()
        self._wakeup = asyncio.Event()
        # Kinds that may have due jobs: a claim that finds fewer than it asked for drops its
        # kind until something says there may be more (NOTIFY, the poll, the reaper), so
        # rounds that only write outcomes do not query idle kinds.
        self._armed = set(registry.kinds())
        # Kinds armed while a claim round was in flight: that round's empty answer predates
        # what armed them (a NOTIFY at commit, a local enqueue), so it must not disarm them.
        self._armed_during_round: set[str] = set()
        self._connection = RoundConnection(db)
        self._outcomes = OutcomeWriter(
            db, now, wake=self._wakeup.set, longest_pause_seconds=policy.lease_seconds / 10
        )

    def wake(self) -> None:
        """Look for due jobs of every kind now instead of at the next poll (on NOTIFY, after
        the reaper released jobs)."""
        self._armed.update(self._registry.kinds())
        self._armed_during_round.update(self._registry.kinds())
        self._wakeup.set()

    def arm(self, kind: str) -> None:
        """A job of `kind` was just queued in this process (by a request or another job's
        handler): look for it now, not at the next poll. No NOTIFY needed, so SQLite too."""
        if kind in self._registry.kinds():
            self._armed.add(kind)
            self._armed_during_round.add(kind)
            self._wakeup.set()

    async def claim_round(self) -> int:
        """Write the outcomes reported since the last round, then claim and start as many due
        jobs as free slots allow (every kind in one statement); returns how many started.
        On SQLite in one transaction; on PostgreSQL in one statement."""
        taken = self._outcomes.take()
        # Jobs whose outcome is written here have finished their handlers: their slots are
        # free for this claim, though their tasks only end once the outcome is resolved.
        freed = Counter(outcome.job.kind for outcome, _ in taken)
        free = {
            registration.kind: registration.concurrency
            - self._running[registration.kind]
            + freed[registration.kind]
            for registration in self._registry
            if registration.kind in self._armed
        }
        if not taken and not any(slots > 0 for slots in free.values()):
            return 0
        self._armed_during_round.clear()
        try:
            async with self._connection.round() as conn:
                written, claimed = await settle_and_claim(
                    conn,
                    [outcome for outcome, _ in taken],
                    limits=free,
                    now=self._now(),
                    lease=self._policy.lease,
                )
        except BaseException:
            self._outcomes.give_back(taken)
            raise
        self._outcomes.resolve(taken, written)
        found = Counter(job.kind for job in claimed)
        self._armed.difference_update(
            kind
            for kind, slots in free.items()
            if found[kind] < slots and kind not in self._armed_during_round
        )
        registrations = {registration.kind: registration for registration in self._registry}
        for job in claimed:
            self._start(registrations[job.kind], job)
        return len(claimed)

    def _start(self, registration: Registration, job: Job) -> None:
        self._running[registration.kind] += 1
        task = asyncio.create_task(self._execute(registration, job))
        self._tasks.add(task)

        def finished(done: asyncio.Task[None]) -> None:
            self._tasks.discard(done)
            self._running[registration.kind] -= 1
            if self._db.is_postgresql:
                self._wakeup.set()  # a slot is free; NOTIFY says when new jobs come
            else:
                self.wake()  # no NOTIFY: the job may have enqueued others, look at every kind

        task.add_done_callback(finished)

    async def run(self, stop: asyncio.Event) -> None:
        """Claim and work until `stop` is set; then stop claiming and let in-flight jobs finish
        within the grace period. Jobs still running after it are cancelled: their leases
        expire and another worker reclaims them (at-least-once, never lost)."""
        stop_watch = asyncio.create_task(self._wake_on(stop))
        self._outcomes.attach()
        try:
            while not stop.is_set():
                self._wakeup.clear()
                try:
                    started = await self.claim_round()
                except Exception as exc:  # the database may be briefly unreachable: keep polling
                    log.warning("queue.claim_failed", error_type=type(exc).__name__)
                    started = 0
                if started or stop.is_set():
                    continue
                try:
                    async with asyncio.timeout(self._policy.poll_interval_seconds):
                        await self._wakeup.wait()
                except TimeoutError:
                    self._armed.update(self._registry.kinds())  # the poll: due times pass
        finally:
            stop_watch.cancel()
            self._outcomes.detach()
        await self.drain(self._policy.shutdown_grace_seconds)

    async def _wake_on(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self.wake()

    async def drain(self, grace_seconds: float) -> None:
        """Let in-flight jobs finish within `grace_seconds`, cancel the rest, and wait for
        every outcome already reported to be written."""
        if self._tasks:
            log.info("queue.draining", in_flight=len(self._tasks))
            _, still_running = await asyncio.wait(set(self._tasks), timeout=grace_seconds)
            for task in still_running:
                task.cancel()
            if still_running:
                await asyncio.wait(still_running)
                log.warning("queue.drain_cancelled", cancelled=len(still_running))
        await self._outcomes.close()
        await self._connection.close()

    async def _execute(self, registration: Registration, job: Job) -> None:
        with structlog.contextvars.bound_contextvars(job_id=job.id, job_kind=job.kind):
            await self._report(await self._outcome_of(registration, job))

    async def _outcome_of(self, registration: Registration, job: Job) -> Outcome:
        try:
            await self._run_handler(registration, job)
        except Defer as exc:
            return Outcome(job, "deferred", delay_seconds=exc.seconds)
        except RetryLater as exc:
            return self._failed(job, exc.reason, retry_after=exc.retry_after_seconds)
        except GiveUp as exc:
            return Outcome(job, "dead", exc.reason)
        except ClaimLost:
            return self._failed(job, "claim lost")  # its outcome write will be refused too
        except TimeoutError:
            return self._failed(job, "timeout")
        except Exception as exc:
            # The class name only: exception messages can carry addresses or payloads.
            log.error("job.handler_crashed", error_type=type(exc).__name__)
            return self._failed(job, f"unexpected {type(exc).__name__}")
        return Outcome(job, "done")

    def _failed(self, job: Job, error: str, *, retry_after: float | None = None) -> Outcome:
        if is_exhausted(job.attempts, job.max_attempts):
            return Outcome(job, "dead", error)
        delay = retry_delay(
            job.attempts,
            base_seconds=self._policy.backoff_base_seconds,
            max_seconds=self._policy.backoff_max_seconds,
            uniform=self._uniform,
            retry_after_seconds=retry_after,
        )
        return Outcome(job, "retry", error, delay_seconds=delay)

    async def _run_handler(self, registration: Registration, job: Job) -> None:
        if not registration.renew_lease:
            timeout = registration.timeout_seconds or self._policy.lease_seconds * 0.8
            async with asyncio.timeout(timeout):
                await registration.handler(job)
            return
        # A long job renews its lease while it works. If the lease is lost (another worker
        # reclaimed the job), the handler is stopped: two workers must not both carry on.
        handler: asyncio.Future[None] = asyncio.ensure_future(registration.handler(job))
        renewer = asyncio.create_task(self._renew_lease(job))
        try:
            await asyncio.wait({handler, renewer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            renewer.cancel()
        if not handler.done():
            handler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await handler
            raise RetryLater("lease lost while working")
        handler.result()

    async def _renew_lease(self, job: Job) -> None:
        """Returns only when the lease is lost; database hiccups are retried until it lapses."""
        renew_every = self._policy.lease_seconds / 3
        last_renewed = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(renew_every)
            try:
                async with self._db.write() as conn:
                    kept = await store.extend_lease(
                        conn, job, now=self._now(), lease=self._policy.lease
                    )
            except Exception as exc:
                log.warning("job.lease_renewal_failed", error_type=type(exc).__name__)
                if asyncio.get_running_loop().time() - last_renewed < self._policy.lease_seconds:
                    continue
                kept = False
            if not kept:
                log.warning("job.lease_lost")
                return
            last_renewed = asyncio.get_running_loop().time()

    async def _report(self, outcome: Outcome) -> None:
        """Write the outcome under the claim token (batched with other jobs'), then log it."""
        kept = await self._outcomes.write(outcome)
        if kept is None:
            return  # never written: the lease lapses and the job is reclaimed
        result: str = outcome.result
        if not kept:
            log.warning("job.outcome_refused", reason="claim_token_mismatch", outcome=result)
            result = "refused"
        else:
            level = "info" if result in ("done", "deferred") else "warning"
            getattr(log, level)(f"job.{result}", attempt=outcome.job.attempts, error=outcome.error)
        if self._on_outcome is not None:
            self._on_outcome(outcome.job.kind, result)
