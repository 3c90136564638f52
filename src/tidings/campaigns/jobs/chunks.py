"""One batch's recipients submitted chunk by chunk, for the `send_batch` job (SND-10, SND-12):
each chunk prepared, marked in flight (consent re-checked in the same write), handed to the
submit strategy, and its outcomes held until the next chunk's mark or the batch's outcome
writes them, in the same transaction (one write per chunk, never more than one chunk in
flight).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tidings.campaigns.jobs.batch_writes import BatchWrites
from tidings.campaigns.jobs.domain_hold import DomainHold
from tidings.campaigns.submit.strategy import (
    ChunkOutcome,
    ChunkVerdict,
    Recipient,
    RecipientOutcome,
    SubmitStrategy,
)
from tidings.domain.errors import TidingsError
from tidings.domain.jobs import RetryLater
from tidings.rendering import SegmentRendering


class SubmitStopped(TidingsError):
    """The worker is shutting down (SND-21): the batch stopped before its next chunk, with
    nothing in flight. The batch is given back for whoever runs next."""

    code = "submit_stopped"


class ChunkRun:
    """The chunks of one batch, in order. `unsettled` holds the outcomes of the chunk last
    submitted, not yet written: the next chunk's mark writes them, or, after the last chunk,
    `settle` or the batch's outcome."""

    def __init__(
        self,
        strategy: SubmitStrategy[Any],
        writes: BatchWrites,
        hold: DomainHold,
        *,
        rendering: SegmentRendering,
        sender: str,
        deliver_at: datetime | None,
    ) -> None:
        self._strategy = strategy
        self._writes = writes
        self._hold = hold
        self._rendering = rendering
        self._sender = sender
        self._deliver_at = deliver_at
        self.unsettled: tuple[RecipientOutcome, ...] = ()
        self.last: ChunkOutcome | None = None  # the last chunk's outcome
        self.deferred = 0  # recipients the provider deferred, over all chunks

    async def run(self, recipients: Sequence[Recipient]) -> bool:
        """Every chunk of `recipients`, then of those held back by their domain while it has
        room soon (SND-25). False when a chunk's verdict ended the batch early."""
        waiting: Sequence[Recipient] | None = recipients
        while waiting:
            for whole in self._strategy.chunks(waiting):
                if not await self._send(whole):
                    return False
            waiting = await self._hold.again()
        return True

    async def settle(self) -> None:
        """The outcomes in hand, written on their own (before leaving the batch early)."""
        await self._writes.settle(self._strategy.in_flight, self.unsettled)

    async def _send(self, whole: Sequence[Recipient]) -> bool:
        """One chunk (less whoever its domain holds back); False when its verdict ends the
        batch."""
        in_flight = self._strategy.in_flight
        try:
            chunk = await self._hold.admit(whole)  # held back by its domain: waits
            if not chunk:
                return True
            submission = await self._strategy.prepare(
                self._rendering,
                self._sender,
                chunk,
                batch_id=self._writes.batch_id,
                now=self._writes.context.now(),
                deliver_at=self._deliver_at,
            )
            if self._writes.context.queue.stopping.is_set():  # shutting down: no new chunk goes
                raise SubmitStopped("the worker is shutting down")
        except BaseException:
            await self.settle()  # what went out is recorded
            raise
        withdrawn = await self._writes.mark_in_flight(
            in_flight, submission.recipient_ids, self.unsettled
        )
        self.unsettled = ()
        submission = self._strategy.without(submission, withdrawn)
        ids: list[int] = submission.recipient_ids
        if not ids:  # everyone in it left since the batch was read
            await self._writes.give_back(in_flight, ids)
            return True
        last = self.last = await self._strategy.submit(submission)
        if last.verdict is ChunkVerdict.SENDER_REFUSED:
            reason = last.detail or f"{last.provider} refused the sender"
            await self._writes.pause_refused(in_flight, ids, _recipient_outcomes(last, ids), reason)
        if last.verdict in (ChunkVerdict.NOT_REACHED, ChunkVerdict.REFUSED):
            await self._writes.give_back(in_flight, ids)  # nothing of it went out
        if last.verdict is ChunkVerdict.NOT_REACHED:
            # Unreachable: the chunk waits, `pending`, for the job's next try.
            raise RetryLater(
                last.detail or f"{last.provider} not reached",
                retry_after_seconds=last.retry_after_seconds,
            )
        self.unsettled = _recipient_outcomes(last, ids)
        self.deferred += last.deferred
        return last.verdict is ChunkVerdict.ANSWERED


def _recipient_outcomes(outcome: ChunkOutcome, ids: list[int]) -> tuple[RecipientOutcome, ...]:
    """Every recipient's outcome in the chunk: those listed, then the rest (`others`)."""
    if outcome.others is None:
        return outcome.recipients
    listed = {o.recipient_id for o in outcome.recipients}
    rest = tuple(
        RecipientOutcome(recipient_id, outcome.others, outcome.others_reason)
        for recipient_id in ids
        if recipient_id not in listed
    )
    return outcome.recipients + rest
