"""The `send_batch` job (SPEC §5.4): claim one batch, read and check its recipients, re-assert
consent, exclude what cannot be sent, submit the rest chunk by chunk through the submit
strategy, and record absolute counts with the batch's status. Any worker serving the campaign
queue takes batches (ARC-5).

A provider that refuses the sender (relaying denied, a login or a certificate refused: the
strategy's SENDER_REFUSED) fails nobody: what went out is recorded, everyone else goes back
`pending`, and the send pauses itself in the same write, the problem named (SND-26), until an
operator fixes the settings and resumes it.

This job decides whether a chunk is sent, and it alone writes the batch (HOUSE rule 19): the
strategy returns typed outcomes, and every write goes through `BatchWrites`, fenced twice — by
the job's claim (`JobQueue.fenced`) and by the batch's own claim token in the statement, so a
worker that lost its lease changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.campaigns import events
from tidings.campaigns.context import SendingContext
from tidings.campaigns.drafts import CampaignDraft
from tidings.campaigns.jobs.batch_writes import BatchWrites, SendHalted
from tidings.campaigns.jobs.domain_hold import DomainHold
from tidings.campaigns.jobs.payloads import SEND_CAMPAIGN, FinaliseCampaign, SendBatch, SendCampaign
from tidings.campaigns.jobs.renderings import Renderings
from tidings.campaigns.jobs.screening import check_unique_addresses, recipient_values, screen
from tidings.campaigns.submit.strategy import (
    ChunkOutcome,
    ChunkVerdict,
    InFlight,
    Recipient,
    RecipientOutcome,
    SubmitStrategy,
)
from tidings.domain.errors import TidingsError
from tidings.domain.jobs import ClaimLost, Defer, RetryLater
from tidings.domain.sending import (
    BatchCounts,
    BatchStatus,
    CampaignStatus,
    Exclusion,
    RecipientState,
    VerificationFailed,
    batch_outcome,
    check_count,
    check_message_counts,
)
from tidings.outbound.domain_rates import DomainRates
from tidings.queue.job import Job
from tidings.rendering import SegmentRendering
from tidings.storage.sending import batch_claims as claim_queries
from tidings.storage.sending import batches as batch_queries
from tidings.storage.sending import campaign_sends as send_queries
from tidings.storage.sending.batch_claims import RecipientRow
from tidings.storage.sending.batches import BatchRow

log = structlog.get_logger("tidings.campaigns")


class BatchError(StrEnum):
    """The error code a batch is left with when it does not complete."""

    OUTCOME_UNCERTAIN = "outcome_uncertain"  # the provider may have it: an operator decides
    PROVIDER_REFUSED = "provider_refused"
    BATCH_ERROR = "batch_error"  # an unexpected error; the job's retry sends the rest


# How long a batch job waits for a resumed send's dispatch before it looks again.
RESUMING_WAIT_SECONDS = 0.5
# A chunk verdict that ends the batch without completing it: the batch's status and its code.
UNFINISHED: dict[ChunkVerdict, tuple[BatchStatus, BatchError]] = {
    ChunkVerdict.ANSWER_LOST: (BatchStatus.SUBMITTING, BatchError.OUTCOME_UNCERTAIN),
    ChunkVerdict.REFUSED: (BatchStatus.FAILED, BatchError.PROVIDER_REFUSED),
}


class SubmitStopped(TidingsError):
    """The worker is shutting down (SND-21): the batch stopped before its next chunk, with
    nothing in flight. The batch is given back for whoever runs next."""

    code = "submit_stopped"


class Claimed(NamedTuple):
    """A batch this worker holds, as read in the claiming transaction."""

    draft: CampaignDraft
    batch: BatchRow
    rendering: SegmentRendering | Exception  # what rendering the segment raised, if it failed
    rows: list[RecipientRow]
    deliver_at: datetime | None


class SendBatchHandler:
    def __init__(
        self,
        context: SendingContext,
        strategy: SubmitStrategy[Any],
        *,
        worker: str = "",
        domain_rates: DomainRates | None = None,
    ) -> None:
        self._ctx = context
        self._strategy = strategy
        self._domains = domain_rates  # per recipient domain (SND-25)
        self._worker = worker  # host:pid, recorded on the batches this process claims
        self._renderings = Renderings(context)

    async def __call__(self, job: Job) -> None:
        step = SendBatch.from_job(job)
        with structlog.contextvars.bound_contextvars(
            campaign_id=step.campaign_id, batch_id=step.batch_id
        ):
            claimed = await self._claim(job, step)
            if claimed is not None:
                try:
                    await self._submit(job, step, claimed)
                except VerificationFailed as exc:
                    await self._fail_batch(job, step, exc)
                except SendHalted:
                    # Paused or cancelled (SND-23): the chunk in hand was recorded; the rest
                    # waits, `pending`, for resume (or becomes `cancelled`). No retry.
                    await self._release(job, step)
                except SubmitStopped:
                    await self._release(job, step)
                    raise Defer("the worker is shutting down", seconds=0) from None
                except Defer:
                    # Recipients held back by their domain's rate (SND-25): still `pending`,
                    # sent when the job is due again; no attempt spent, nobody failed.
                    await self._release(job, step)
                    raise
                except RetryLater:
                    # Unreachable, or readers deferred: what is still pending goes out on the
                    # job's next try, by whichever worker takes the batch.
                    await self._release(job, step)
                    raise
                except (asyncio.CancelledError, ClaimLost):
                    raise
                except BaseException as exc:
                    # Anything else, whatever its type: the batch is released with the error
                    # recorded now, not left for its lease to lapse.
                    await self._release_after_error(job, step, exc)
                    raise
            await self._maybe_finalise(step)

    async def _claim(self, job: Job, step: SendBatch) -> Claimed | None:
        """The batch, claimed for this job, with its recipients read in the same transaction
        (one round of the database per batch, not two), or None when there is nothing to do."""
        token = str(job.claim_token)
        draft = await self._renderings.draft(step.campaign_id)
        async with self._ctx.queue.fenced(job) as conn:
            send = await send_queries.get(conn, step.campaign_id)
            if send is None or send.attempt != step.attempt:
                return None  # a job of an earlier attempt: the current one has its own
            status = await send_queries.status(conn, step.campaign_id)
            if status == CampaignStatus.PENDING and await self._ctx.queue.live_keys(
                conn,
                kinds=[SEND_CAMPAIGN],
                key_patterns=[SendCampaign(step.campaign_id, step.attempt).idempotency_key],
            ):
                # Resumed and not yet dispatched (SND-23): the dispatch revives batch jobs that
                # finished, not one running now, so this one must not finish empty-handed. (With
                # the send's own job gone, it finishes, and the sweep resumes the send.)
                raise Defer("the send is being resumed", seconds=RESUMING_WAIT_SECONDS)
            if status != CampaignStatus.SUBMITTING:
                return None
            outcome, _previous = await claim_queries.claim(
                conn, step.batch_id, token=token, now=self._ctx.now(), worker=self._worker
            )
            if outcome in ("held", "finished"):
                log.info("campaign.batch_skipped", outcome=outcome)
                return None
            batch = await batch_queries.get(conn, step.batch_id)
            assert batch is not None
            if outcome == "taken_over":
                # Whoever held it died mid-send: what it had in flight may have gone out.
                # Per recipient, that is the rows marked `sending`; for a batch call, every
                # row still pending once the batch was marked handed over (SND-13).
                in_flight = [RecipientState.SENDING]
                if batch.handed_over_at is not None:
                    in_flight.append(RecipientState.PENDING)
                uncertain = await claim_queries.move(
                    conn,
                    step.batch_id,
                    token=token,
                    now=self._ctx.now(),
                    from_states=in_flight,
                    to_state=RecipientState.UNCERTAIN,
                    reason="in_flight_at_crash",
                )
                log.warning("campaign.batch_taken_over", uncertain=uncertain)
                if batch.handed_over_at is not None:  # never resubmitted: an operator decides
                    await claim_queries.finish(
                        conn,
                        batch.id,
                        token=token,
                        now=self._ctx.now(),
                        status=BatchStatus.SUBMITTING,
                        counts=await claim_queries.counts(conn, batch.id),
                        error_code=BatchError.OUTCOME_UNCERTAIN,
                        error="The worker sending this batch stopped after the request may have "
                        "reached the provider. Reconcile it before any retry.",
                    )
                    return None
            # Rendered once per segment and worker (CMP-3); its slots say whether the
            # readers' custom fields are needed at all.
            try:
                rendering = self._renderings.get(draft, batch.segment, batch.sending_domain)
            except Exception as exc:
                # The claim stands and `_submit` raises it: like any error while sending the
                # batch, it is recorded on the batch as the batch is released for a retry.
                return Claimed(draft, batch, exc, [], None)
            rows = await claim_queries.load(
                conn,
                batch.id,
                draft.newsletter.id,
                attributes=rendering.slots.uses_attributes,
            )
            deliver_at = await self._deliver_at(conn, batch)
        return Claimed(draft, batch, rendering, rows, deliver_at)

    async def _submit(self, job: Job, step: SendBatch, claimed: Claimed) -> None:
        draft, batch, rendering, rows, deliver_at = claimed
        if isinstance(rendering, Exception):
            raise rendering
        check_count(
            "batch_recipient_read",
            expected=batch.recipient_count,
            actual=len(rows),
            batch_id=batch.id,
        )
        pending = [row for row in rows if row.state == RecipientState.PENDING.value]
        exclusions, sendable = screen(pending)
        check_unique_addresses(batch, sendable)
        recipients = [
            Recipient(row.id, recipient_values(row, self._ctx.secret())) for row in sendable
        ]
        check_message_counts(
            len(pending),
            len(recipients),
            len(exclusions),
            batch_id=batch.id,
            recipient_count=batch.recipient_count,
        )
        writes = BatchWrites(self._ctx, job, batch.id, batch.campaign_id, draft.newsletter.id)
        await self._exclude(writes, step, exclusions)
        strategy, in_flight = self._strategy, self._strategy.in_flight
        # The chunk just submitted: its outcomes are written with the next chunk's mark, or
        # with the batch's own outcome after the last one (one transaction each).
        settled_later: tuple[RecipientOutcome, ...] = ()
        last: ChunkOutcome | None = None
        deferred = 0
        # Per-recipient sends are paced per recipient domain (SND-25); a batch call is not.
        hold = DomainHold(self._domains if in_flight is InFlight.EACH_RECIPIENT else None)
        ended = False
        waiting: Sequence[Recipient] | None = recipients
        while waiting:
            for whole in strategy.chunks(waiting):
                try:
                    chunk = await hold.admit(whole)  # held back by its domain: waits
                    if not chunk:
                        continue
                    submission = await strategy.prepare(
                        rendering,
                        draft.newsletter.sender_address,
                        chunk,
                        batch_id=batch.id,
                        now=self._ctx.now(),
                        deliver_at=deliver_at,
                    )
                    if self._ctx.queue.stopping.is_set():  # shutting down: no new chunk goes
                        raise SubmitStopped("the worker is shutting down")
                except BaseException:
                    await writes.settle(in_flight, settled_later)  # what went out is recorded
                    raise
                withdrawn = await writes.mark_in_flight(
                    in_flight, submission.recipient_ids, settled_later
                )
                settled_later = ()
                submission = strategy.without(submission, withdrawn)
                ids: list[int] = submission.recipient_ids
                if not ids:  # everyone in it left since the batch was read
                    await writes.give_back(in_flight, ids)
                    continue
                last = await strategy.submit(submission)
                if last.verdict is ChunkVerdict.SENDER_REFUSED:
                    outcomes = settled_later + _recipient_outcomes(last, ids)
                    reason = last.detail or f"{last.provider} refused the sender"
                    await writes.pause_refused(in_flight, ids, outcomes, reason)
                if last.verdict in (ChunkVerdict.NOT_REACHED, ChunkVerdict.REFUSED):
                    await writes.give_back(in_flight, ids)  # nothing of it went out
                if last.verdict is ChunkVerdict.NOT_REACHED:
                    # Unreachable: the chunk waits, `pending`, for the job's next try.
                    raise RetryLater(
                        last.detail or f"{last.provider} not reached",
                        retry_after_seconds=last.retry_after_seconds,
                    )
                settled_later = _recipient_outcomes(last, ids)
                deferred += last.deferred
                if last.verdict is not ChunkVerdict.ANSWERED:
                    ended = True
                    break
            waiting = None if ended else await hold.again()
        if deferred and last is not None:
            # Still deferred after the retries inside the batch: the job's next try sends
            # them (later, on a fresh connection); everything else is recorded now.
            await writes.settle(in_flight, settled_later)
            raise RetryLater(f"{last.provider} deferred {deferred} recipient(s)")
        if hold.held and not ended:
            # Not a failure and no attempt spent: they stay `pending`, and the job comes back
            # for them when their domain has room (SND-25).
            await writes.settle(in_flight, settled_later)
            raise Defer(hold.reason, seconds=hold.wait_seconds)
        await self._finish(writes, batch, settled_later, last)

    async def _deliver_at(self, conn: AsyncConnection, batch: BatchRow) -> datetime | None:
        """With a delivery spread, batch k of n is held until start + spread × k / n, so the
        audience receives it over the window instead of all at once (PRV-2)."""
        spread = self._ctx.policy.delivery_spread
        if spread is None:
            return None
        send = await send_queries.get(conn, batch.campaign_id)
        pages = await batch_queries.page_count(conn, batch.campaign_id)
        if send is None or pages <= 1:
            return None
        at: datetime = send.attempt_started_at + spread * (batch.page - 1) / pages
        return at if at > self._ctx.now() else None

    async def _finish(
        self,
        writes: BatchWrites,
        batch: BatchRow,
        settled: tuple[RecipientOutcome, ...],
        last: ChunkOutcome | None,
    ) -> None:
        """The last chunk's outcomes and the batch's own, in one transaction: absolute
        counts from the rows, and the status they make (SND-11) — unless the last chunk's
        verdict left the batch unfinished."""
        unfinished = None if last is None else UNFINISHED.get(last.verdict)
        provider_message_id = None if last is None else last.provider_message_id
        error = None if last is None else last.detail

        async def record(conn: AsyncConnection) -> tuple[BatchStatus, BatchCounts]:
            await claim_queries.settle(
                conn,
                batch.id,
                [(o.recipient_id, o.state, o.reason) for o in settled],
                token=writes.token,
                now=self._ctx.now(),
                from_state=self._strategy.in_flight.row_state,
                counted=False,  # `finish` writes the counts from the rows, just below
            )
            counts = await claim_queries.counts(conn, batch.id)
            if unfinished is None:
                status = batch_outcome(batch.recipient_count, counts, batch_id=batch.id)
            else:
                status = unfinished[0]
            await claim_queries.finish(
                conn,
                batch.id,
                token=writes.token,
                now=self._ctx.now(),
                status=status,
                counts=counts,
                provider_message_id=provider_message_id,
                error_code=None if unfinished is None else unfinished[1],
                error=None if unfinished is None else error,
            )
            return status, counts

        status, counts = await writes.write(record)  # kept through a brief database outage
        if status == BatchStatus.SUBMITTED:
            events.batch_submitted(
                batch.campaign_id,
                batch.id,
                recipient_count=batch.recipient_count,
                submitted_count=counts[RecipientState.SENT],
                submission_excluded_count=counts[RecipientState.EXCLUDED],
                provider_message_id=provider_message_id,
            )

    async def _exclude(
        self,
        writes: BatchWrites,
        step: SendBatch,
        exclusions: list[tuple[RecipientRow, Exclusion]],
    ) -> None:
        for reason in {reason for _row, reason in exclusions}:
            await writes.move(
                [row.id for row, why in exclusions if why == reason],
                from_states=[RecipientState.PENDING],
                to_state=RecipientState.EXCLUDED,
                reason=reason.value,
            )
        for row, reason in exclusions:
            events.excluded(
                "submission",
                step.campaign_id,
                row.subscriber_id,
                reason.value,
                batch_id=step.batch_id,
            )

    async def _fail_batch(self, job: Job, step: SendBatch, error: VerificationFailed) -> None:
        events.verification_failed(step.campaign_id, error)
        async with self._ctx.queue.fenced(job) as conn:
            counts = await claim_queries.counts(conn, step.batch_id)
            await claim_queries.finish(
                conn,
                step.batch_id,
                token=str(job.claim_token),
                now=self._ctx.now(),
                status=BatchStatus.FAILED,
                counts=counts,
                error_code=error.code,
                error=error.detail,
            )

    async def _release(self, job: Job, step: SendBatch) -> None:
        """SND-21: stopped between chunks, every outcome settled (or a retry later). The batch
        goes back to `pending`: whoever runs its job next sends only what is still pending.
        If even this write fails, the batch is left to the takeover after its lease."""
        try:
            async with self._ctx.queue.fenced(job) as conn:
                released = await claim_queries.release(
                    conn, step.batch_id, token=str(job.claim_token), now=self._ctx.now()
                )
        except Exception as exc:
            log.warning("campaign.batch_not_released", error_type=type(exc).__name__)
            return
        log.info("campaign.batch_released", released=released)

    async def _release_after_error(self, job: Job, step: SendBatch, error: BaseException) -> None:
        """An unexpected error (SND-12's "of any type", at the batch): readers in flight may
        have gone out, so they become `uncertain`; the rest stay `pending`, the error is
        recorded on the batch, and the batch goes back to `pending` for the job's retry."""
        kind = type(error).__name__
        log.error("campaign.batch_error", error_type=kind)
        try:
            async with self._ctx.queue.fenced(job) as conn:
                token, now = str(job.claim_token), self._ctx.now()
                await claim_queries.move(
                    conn,
                    step.batch_id,
                    token=token,
                    now=now,
                    from_states=[RecipientState.SENDING],
                    to_state=RecipientState.UNCERTAIN,
                    reason="in_flight_at_error",
                )
                await claim_queries.release(
                    conn,
                    step.batch_id,
                    token=token,
                    now=now,
                    error_code=BatchError.BATCH_ERROR,
                    error=f"The worker sending this batch stopped on an unexpected {kind}; "
                    "its job tries the readers not yet sent again.",
                )
        except Exception as exc:
            log.warning("campaign.batch_not_released", error_type=type(exc).__name__)

    async def _maybe_finalise(self, step: SendBatch) -> None:
        """After this batch's outcome committed: if no batch owes work, queue the finalise
        step. Of two workers finishing the last batches together, at least the later one
        sees both outcomes; the idempotency key makes two requests one job."""
        async with self._ctx.db.read() as conn:  # a read first: most batches are not last
            if await batch_queries.any_unsettled(conn, step.campaign_id):
                return
        async with self._ctx.db.write() as conn:
            finalise = FinaliseCampaign(step.campaign_id, step.attempt)
            await self._ctx.queue.enqueue(
                conn, finalise.kind, finalise.idempotency_key, finalise.to_payload()
            )


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
