"""Every write a worker makes about the one batch it holds — the claim, the chunks, the
hand-backs and the outcome (`_finish_in`, whichever way the batch ends) — inside the queue's
fenced transaction (the job's claim held) and conditional on the batch's claim token (SND-12).

Each is also conditional on the rows' states, so it can be made again: through a brief database
outage (a restart, a failover) the worker keeps the outcomes it holds and tries the write again
while its lease allows, rather than leave recipients the relay took to become `uncertain` (PRV-1).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TypeVar

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.campaigns import send_events
from tidings.campaigns.context import SendingContext
from tidings.campaigns.control import SendControl
from tidings.campaigns.submit.strategy import ChunkOutcome, ChunkVerdict, InFlight, RecipientOutcome
from tidings.domain.errors import Conflict, TidingsError
from tidings.domain.provider_health import PROVIDER_PAUSE_ACTOR
from tidings.domain.sending import (
    BatchCounts,
    BatchStatus,
    RecipientState,
    VerificationFailed,
    batch_outcome,
)
from tidings.queue.job import Job
from tidings.storage.errors import is_outage
from tidings.storage.sending import batch_claims as claim_queries
from tidings.storage.sending import chunk_writes
from tidings.storage.sending.batch_claims import ClaimOutcome
from tidings.storage.sending.batches import BatchRow

log = structlog.get_logger("tidings.campaigns")
T = TypeVar("T")
FIRST_PAUSE_SECONDS = 0.1
LONGEST_PAUSE_SECONDS = 2.0


class BatchError(StrEnum):
    """The error code a batch is left with when it does not complete."""

    OUTCOME_UNCERTAIN = "outcome_uncertain"  # the provider may have it: an operator decides
    PROVIDER_REFUSED = "provider_refused"
    BATCH_ERROR = "batch_error"  # an unexpected error; the job's retry sends the rest


# A chunk verdict that ends the batch without completing it: the batch's status and its code.
UNFINISHED: dict[ChunkVerdict, tuple[BatchStatus, BatchError]] = {
    ChunkVerdict.ANSWER_LOST: (BatchStatus.SUBMITTING, BatchError.OUTCOME_UNCERTAIN),
    ChunkVerdict.REFUSED: (BatchStatus.FAILED, BatchError.PROVIDER_REFUSED),
}


class SendHalted(TidingsError):
    """The campaign was paused or cancelled (SND-23): the outcomes in hand were recorded and
    nothing more of it is handed over; the batch is given back."""

    code = "send_halted"


@dataclass(frozen=True)
class BatchWrites:
    """The fenced-write API of the batch one `send_batch` job holds."""

    context: SendingContext
    job: Job
    batch_id: int
    campaign_id: int
    newsletter_id: int

    @property
    def token(self) -> str:
        return str(self.job.claim_token)

    def transaction(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """One fenced transaction, tried once: the claim's, which reads the batch as it
        claims it, and the hand-backs' (left to the takeover after the lease if they fail)."""
        return self.context.queue.fenced(self.job)

    async def write(self, make: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """`make` in one fenced transaction, tried again through a database outage for up to
        a lease (the job's lease renewal gives up, and cancels this, no sooner). Any other
        error, and a lost claim, end it at once."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.context.queue.policy.lease_seconds
        pause = FIRST_PAUSE_SECONDS
        while True:
            try:
                async with self.context.queue.fenced(self.job) as conn:
                    return await make(conn)
            except Exception as exc:
                if not is_outage(exc) or loop.time() + pause > give_up:
                    raise
                log.warning("campaign.write_retried", error_type=type(exc).__name__)
            await asyncio.sleep(pause)
            pause = min(pause * 2, LONGEST_PAUSE_SECONDS)

    async def move(
        self,
        ids: Sequence[int] | None,
        *,
        from_states: Sequence[RecipientState],
        to_state: RecipientState,
        reason: str | None = None,
    ) -> int:
        async def make(conn: AsyncConnection) -> int:
            return await claim_queries.move(
                conn,
                self.batch_id,
                token=self.token,
                now=self.context.now(),
                ids=ids,
                from_states=from_states,
                to_state=to_state,
                reason=reason,
            )

        return await self.write(make)

    async def mark_in_flight(
        self,
        in_flight: InFlight,
        ids: Sequence[int],
        settled: Sequence[RecipientOutcome] = (),
    ) -> frozenset[int]:
        """The next chunk in flight (`ids`), with the previous chunk's outcomes (`settled`)
        in the same transaction (one statement on PostgreSQL, `chunk_writes`): fewer writes than
        doing them apart, and still never more
        than one chunk `sending`. Per recipient the rows become `sending` (a crash before
        their own settle leaves them `uncertain`); for a batch call the batch row is marked
        handed over and the rows stay `pending`. Consent is re-checked in the same write
        (SND-10): returns the ids excluded instead, never to be handed over. A paused or
        cancelled send (SND-23) has the outcomes settled and nothing marked: `SendHalted`."""

        async def make(conn: AsyncConnection) -> list[claim_queries.Withdrawn] | None:
            now = self.context.now()
            withdrawn = await chunk_writes.settle_and_mark(
                conn,
                self.batch_id,
                campaign_id=self.campaign_id,
                newsletter_id=self.newsletter_id,
                settled=[(o.recipient_id, o.state, o.reason) for o in settled],
                ids=ids,
                in_flight=in_flight.row_state,
                token=self.token,
                now=now,
            )
            if withdrawn is not None and in_flight is InFlight.WHOLE_BATCH:
                await claim_queries.mark_handed_over(conn, self.batch_id, token=self.token, at=now)
            return withdrawn

        return self._excluded(await self.write(make))

    def _excluded(self, withdrawn: Sequence[claim_queries.Withdrawn] | None) -> frozenset[int]:
        if withdrawn is None:
            raise SendHalted("the send was paused or cancelled")
        for row in withdrawn:
            send_events.excluded(
                "submission",
                self.campaign_id,
                row.subscriber_id,
                row.reason,
                batch_id=self.batch_id,
            )
        return frozenset(row.id for row in withdrawn)

    async def give_back(self, in_flight: InFlight, ids: Sequence[int]) -> None:
        """The chunk certainly did not go out: per recipient its rows go back to `pending`;
        for a batch call the batch's handed-over mark is cleared."""
        if in_flight is InFlight.EACH_RECIPIENT:
            if ids:
                await self.move(
                    ids, from_states=[RecipientState.SENDING], to_state=RecipientState.PENDING
                )
            return

        async def make(conn: AsyncConnection) -> bool:
            return await claim_queries.mark_handed_over(
                conn, self.batch_id, token=self.token, at=None
            )

        await self.write(make)

    async def settle(self, in_flight: InFlight, outcomes: Sequence[RecipientOutcome]) -> None:
        """Outcomes in hand, written on their own (before leaving the batch early)."""
        if not outcomes:
            return

        async def make(conn: AsyncConnection) -> None:
            await self._settle(conn, outcomes, in_flight.row_state, self.context.now())

        await self.write(make)

    async def pause_refused(
        self,
        in_flight: InFlight,
        ids: Sequence[int],
        outcomes: Sequence[RecipientOutcome],
        reason: str,
    ) -> None:
        """The provider refused the sender (SND-26): the outcomes in hand recorded (the
        chunk's unsent recipients back to `pending`) and the send paused with `reason`, by
        `system:provider`, in one write; then `SendHalted`, so the batch is given back.
        Nobody is `failed`, and no retry of the job is spent on it."""
        if in_flight is InFlight.WHOLE_BATCH:
            await self.give_back(in_flight, ids)  # the batch call certainly took nothing

        async def make(conn: AsyncConnection) -> bool:
            await self._settle(conn, outcomes, in_flight.row_state, self.context.now())
            try:
                await SendControl(self.context).pause_in(
                    conn, self.campaign_id, actor=PROVIDER_PAUSE_ACTOR, reason=reason
                )
            except Conflict:
                return False  # paused or cancelled meanwhile: nothing more to say
            return True

        if await self.write(make):
            log.warning("campaign.paused", actor=PROVIDER_PAUSE_ACTOR, reason=reason)
        raise SendHalted("the provider refused the sender: the send is paused")

    async def _settle(
        self,
        conn: AsyncConnection,
        outcomes: Sequence[RecipientOutcome],
        from_state: RecipientState,
        now: datetime,
    ) -> None:
        """Each recipient's own outcome (SND-12), from its in-flight state."""
        if outcomes:
            await claim_queries.settle(
                conn,
                self.batch_id,
                [(o.recipient_id, o.state, o.reason) for o in outcomes],
                token=self.token,
                now=now,
                from_state=from_state,
            )

    async def claim(self, conn: AsyncConnection, *, worker: str) -> ClaimOutcome:
        """The batch claimed for this job (`transaction`'s `conn`)."""
        outcome, _previous = await claim_queries.claim(
            conn, self.batch_id, token=self.token, now=self.context.now(), worker=worker
        )
        return outcome

    async def take_over(self, conn: AsyncConnection, batch: BatchRow) -> bool:
        """Whoever held the batch died mid-send: what it had in flight may have gone out.
        Per recipient, that is the rows marked `sending`; for a batch call, every row still
        pending once the batch was marked handed over (SND-13). A batch call is never
        resubmitted: the batch awaits an operator, and this returns False."""
        in_flight = [RecipientState.SENDING]
        if batch.handed_over_at is not None:
            in_flight.append(RecipientState.PENDING)
        uncertain = await claim_queries.move(
            conn,
            self.batch_id,
            token=self.token,
            now=self.context.now(),
            from_states=in_flight,
            to_state=RecipientState.UNCERTAIN,
            reason="in_flight_at_crash",
        )
        log.warning("campaign.batch_taken_over", uncertain=uncertain)
        if batch.handed_over_at is None:
            return True
        await self._finish_in(
            conn,
            BatchStatus.SUBMITTING,
            await claim_queries.counts(conn, self.batch_id),
            error_code=BatchError.OUTCOME_UNCERTAIN,
            error="The worker sending this batch stopped after the request may have "
            "reached the provider. Reconcile it before any retry.",
        )
        return False

    async def finish(
        self,
        in_flight: InFlight,
        settled: Sequence[RecipientOutcome],
        last: ChunkOutcome | None,
        recipient_count: int,
    ) -> tuple[BatchStatus, BatchCounts]:
        """The last chunk's outcomes and the batch's own, in one transaction: absolute
        counts from the rows, and the status they make (SND-11) — unless the last chunk's
        verdict left the batch unfinished. Kept through a brief database outage."""
        unfinished = None if last is None else UNFINISHED.get(last.verdict)

        async def make(conn: AsyncConnection) -> tuple[BatchStatus, BatchCounts]:
            await claim_queries.settle(
                conn,
                self.batch_id,
                [(o.recipient_id, o.state, o.reason) for o in settled],
                token=self.token,
                now=self.context.now(),
                from_state=in_flight.row_state,
                counted=False,  # `_finish_in` writes the counts from the rows, just below
            )
            counts = await claim_queries.counts(conn, self.batch_id)
            if unfinished is None:
                status = batch_outcome(recipient_count, counts, batch_id=self.batch_id)
            else:
                status = unfinished[0]
            await self._finish_in(
                conn,
                status,
                counts,
                provider_message_id=None if last is None else last.provider_message_id,
                error_code=None if unfinished is None else unfinished[1],
                error=None if unfinished is None or last is None else last.detail,
            )
            return status, counts

        return await self.write(make)

    async def fail(self, error: VerificationFailed) -> None:
        """A count check failed (`VerificationFailed`): the batch ends `failed` with its code."""
        async with self.transaction() as conn:
            await self._finish_in(
                conn,
                BatchStatus.FAILED,
                await claim_queries.counts(conn, self.batch_id),
                error_code=error.code,
                error=error.detail,
            )

    async def _finish_in(
        self,
        conn: AsyncConnection,
        status: BatchStatus,
        counts: BatchCounts,
        *,
        provider_message_id: str | None = None,
        error_code: str | None = None,
        error: str | None = None,
    ) -> None:
        """The batch's outcome, whichever way it ends: `status` with absolute `counts`."""
        await claim_queries.finish(
            conn,
            self.batch_id,
            token=self.token,
            now=self.context.now(),
            status=status,
            counts=counts,
            provider_message_id=provider_message_id,
            error_code=error_code,
            error=error,
        )

    async def release(self) -> None:
        """SND-21: stopped between chunks, every outcome settled (or a retry later). The batch
        goes back to `pending`: whoever runs its job next sends only what is still pending.
        If even this write fails, the batch is left to the takeover after its lease."""
        try:
            async with self.transaction() as conn:
                released = await claim_queries.release(
                    conn, self.batch_id, token=self.token, now=self.context.now()
                )
        except Exception as exc:
            log.warning("campaign.batch_not_released", error_type=type(exc).__name__)
            return
        log.info("campaign.batch_released", released=released)

    async def release_after_error(self, error: BaseException) -> None:
        """An unexpected error (SND-12's "of any type", at the batch): recipients in flight
        may have gone out, so they become `uncertain`; the rest stay `pending`, the error is
        recorded on the batch, and the batch goes back to `pending` for the job's retry."""
        kind = type(error).__name__
        log.error("campaign.batch_error", error_type=kind)
        try:
            async with self.transaction() as conn:
                now = self.context.now()
                await claim_queries.move(
                    conn,
                    self.batch_id,
                    token=self.token,
                    now=now,
                    from_states=[RecipientState.SENDING],
                    to_state=RecipientState.UNCERTAIN,
                    reason="in_flight_at_error",
                )
                await claim_queries.release(
                    conn,
                    self.batch_id,
                    token=self.token,
                    now=now,
                    error_code=BatchError.BATCH_ERROR,
                    error=f"The worker sending this batch stopped on an unexpected {kind}; "
                    "its job tries the recipients not yet sent again.",
                )
        except Exception as exc:
            log.warning("campaign.batch_not_released", error_type=type(exc).__name__)
