"""Outcome writing in batches: the outcomes of every job that finished since the previous
write go to the database in one transaction (with the next claim, while the worker's claim
loop runs), each still fenced by its own claim token and each with its attempt row (DLV-2,
DLV-3).

A handler's task waits until its outcome is committed (or given up on), so a job counts
against its kind's concurrency until then, and a worker draining on shutdown has written
everything its finished jobs reported.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime

import structlog

from tidings.queue.rounds import Outcome, settle
from tidings.storage.database import Database

log = structlog.get_logger("tidings.queue")
OUTCOME_WRITE_TRIES = 5


Waiting = tuple[Outcome, "asyncio.Future[bool | None]"]


class OutcomeWriter:
    """Collects outcomes for batch writes. While the worker's claim loop runs (`attach`), it
    takes them into its next round, which settles them and claims new work in one
    transaction; otherwise (draining, or a claim round called alone) they are written on
    their own, one batch at a time."""

    def __init__(
        self,
        db: Database,
        now: Callable[[], datetime],
        *,
        wake: Callable[[], None],
        longest_pause_seconds: float,
    ) -> None:
        self._db = db
        self._now = now
        self._wake = wake
        self._longest_pause = longest_pause_seconds
        self._waiting: list[Waiting] = []
        self._writing: asyncio.Task[None] | None = None
        self._claim_loop_attached = False

    async def write(self, outcome: Outcome) -> bool | None:
        """Write `outcome` with whatever else is waiting. True when written, False when the
        claim token no longer held the job (nothing written), None when the database could
        not be reached in all tries (the lease will lapse and the job be reclaimed)."""
        future: asyncio.Future[bool | None] = asyncio.get_running_loop().create_future()
        self._waiting.append((outcome, future))
        if self._claim_loop_attached:
            self._wake()
        else:
            self._write_soon()
        # Cancelling the caller cancels only its wait: the outcome is written all the same.
        return await future

    def attach(self) -> None:
        """The claim loop takes the outcomes from now on (`take`, `resolve`)."""
        self._claim_loop_attached = True

    def detach(self) -> None:
        """The claim loop stopped: write what waits, and what comes, on their own."""
        self._claim_loop_attached = False
        self._write_soon()

    def take(self) -> list[Waiting]:
        taken, self._waiting = self._waiting, []
        return taken

    def give_back(self, taken: list[Waiting]) -> None:
        """A round failed before committing: its outcomes wait for the next one."""
        self._waiting[:0] = taken
        if not self._claim_loop_attached:
            self._write_soon()

    @staticmethod
    def resolve(taken: list[Waiting], written: set[int] | None) -> None:
        for outcome, future in taken:
            if not future.done():
                future.set_result(None if written is None else outcome.job.id in written)

    async def close(self) -> None:
        """Wait for the outcomes already handed over to be written."""
        while self._writing is not None and not self._writing.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._writing)

    def _write_soon(self) -> None:
        if self._waiting and (self._writing is None or self._writing.done()):
            self._writing = asyncio.create_task(self._write_all())

    async def _write_all(self) -> None:
        await asyncio.sleep(0)  # let handlers finishing in this same turn join the batch
        while self._waiting and not self._claim_loop_attached:
            taken = self.take()
            self.resolve(taken, await self._write_batch([outcome for outcome, _ in taken]))

    async def _write_batch(self, outcomes: list[Outcome]) -> set[int] | None:
        """A database hiccup is retried while the lease lasts; if no try succeeds the leases
        expire and the jobs are reclaimed (at-least-once)."""
        for attempt in range(OUTCOME_WRITE_TRIES):
            try:
                async with self._db.write() as conn:
                    return await settle(conn, outcomes, now=self._now())
            except Exception as exc:
                log.warning(
                    "job.outcome_write_failed",
                    error_type=type(exc).__name__,
                    jobs=len(outcomes),
                    try_number=attempt + 1,
                )
                await asyncio.sleep(min(2.0**attempt, self._longest_pause))
        return None
