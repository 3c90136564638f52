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
from datetime import datetime
from typing import Any, NamedTuple

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.campaigns import send_events
from tidings.campaigns.context import SendingContext
from tidings.campaigns.drafts import CampaignDraft
from tidings.campaigns.jobs.batch_writes import BatchWrites, SendHalted
from tidings.campaigns.jobs.chunks import ChunkRun, SubmitStopped
from tidings.campaigns.jobs.domain_hold import DomainHold
from tidings.campaigns.jobs.payloads import SEND_CAMPAIGN, FinaliseCampaign, SendBatch, SendCampaign
from tidings.campaigns.jobs.renderings import Renderings
from tidings.campaigns.jobs.screening import (
    TrackedSend,
    check_unique_addresses,
    recipient_values,
    screen,
)
from tidings.campaigns.submit.strategy import InFlight, Recipient, SubmitStrategy
from tidings.domain.jobs import ClaimLost, Defer, RetryLater
from tidings.domain.sending import (
    BatchStatus,
    CampaignStatus,
    Exclusion,
    RecipientState,
    VerificationFailed,
    check_count,
    check_message_counts,
)
from tidings.outbound.domain_rates import DomainRates
from tidings.queue.job import Job
from tidings.rendering import SegmentRendering
from tidings.storage.sending import batch_recipients
from tidings.storage.sending import batches as batch_queries
from tidings.storage.sending import campaign_sends as send_queries
from tidings.storage.sending.batch_claims import ClaimOutcome
from tidings.storage.sending.batch_recipients import RecipientRow
from tidings.storage.sending.batches import BatchRow

log = structlog.get_logger("tidings.campaigns")


# How long a batch job waits for a resumed send's dispatch before it looks again.
RESUMING_WAIT_SECONDS = 0.5


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
            draft = await self._renderings.draft(step.campaign_id)
            writes = BatchWrites(
                self._ctx, job, step.batch_id, step.campaign_id, draft.newsletter.id
            )
            claimed = await self._claim(writes, step, draft)
            if claimed is not None:
                try:
                    await self._submit(writes, step, claimed)
                except VerificationFailed as exc:
                    send_events.verification_failed(step.campaign_id, exc)
                    await writes.fail(exc)
                except SendHalted:
                    # Paused or cancelled (SND-23): the chunk in hand was recorded; the rest
                    # waits, `pending`, for resume (or becomes `cancelled`). No retry.
                    await writes.release()
                except SubmitStopped:
                    await writes.release()
                    raise Defer("the worker is shutting down", seconds=0) from None
                except Defer:
                    # Recipients held back by their domain's rate (SND-25): still `pending`,
                    # sent when the job is due again; no attempt spent, nobody failed.
                    await writes.release()
                    raise
                except RetryLater:
                    # Unreachable, or recipients deferred: what is still pending goes out on the
                    # job's next try, by whichever worker takes the batch.
                    await writes.release()
                    raise
                except (asyncio.CancelledError, ClaimLost):
                    raise
                except BaseException as exc:
                    # Anything else, whatever its type: the batch is released with the error
                    # recorded now, not left for its lease to lapse.
                    await writes.release_after_error(exc)
                    raise
            await self._maybe_finalise(step)

    async def _claim(
        self, writes: BatchWrites, step: SendBatch, draft: CampaignDraft
    ) -> Claimed | None:
        """The batch, claimed for this job, with its recipients read in the same transaction
        (one round of the database per batch, not two), or None when there is nothing to do."""
        async with writes.transaction() as conn:
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
            outcome = await writes.claim(conn, worker=self._worker)
            if outcome in (ClaimOutcome.HELD, ClaimOutcome.FINISHED):
                log.info("campaign.batch_skipped", outcome=outcome.value)
                return None
            batch = await batch_queries.get(conn, step.batch_id)
            assert batch is not None
            if outcome is ClaimOutcome.TAKEN_OVER and not await writes.take_over(conn, batch):
                return None  # a batch call possibly handed over: an operator decides
            # Rendered once per segment and worker (CMP-3); its slots say whether the
            # recipients' custom fields are needed at all.
            try:
                rendering = self._renderings.get(draft, batch.segment, batch.sending_domain)
            except Exception as exc:
                # The claim stands and `_submit` raises it: like any error while sending the
                # batch, it is recorded on the batch as the batch is released for a retry.
                return Claimed(draft, batch, exc, [], None)
            # Its tracked links are stored before its first message goes out (ENG-2).
            await self._renderings.store_links(conn, rendering)
            rows = await batch_recipients.load(
                conn,
                batch.id,
                draft.newsletter.id,
                attributes=rendering.slots.uses_attributes,
            )
            deliver_at = await self._deliver_at(conn, batch)
        self._renderings.links_stored(rendering)
        return Claimed(draft, batch, rendering, rows, deliver_at)

    async def _submit(self, writes: BatchWrites, step: SendBatch, claimed: Claimed) -> None:
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
        tracked = (
            None
            if rendering.tracking is None
            else TrackedSend(rendering.tracking, batch.campaign_id, self._ctx.now())
        )
        secret = self._ctx.secret()
        recipients = [Recipient(row.id, recipient_values(row, secret, tracked)) for row in sendable]
        check_message_counts(
            len(pending),
            len(recipients),
            len(exclusions),
            batch_id=batch.id,
            recipient_count=batch.recipient_count,
        )
        await self._exclude(writes, step, exclusions)
        in_flight = self._strategy.in_flight
        # Per-recipient sends are paced per recipient domain (SND-25); a batch call is not.
        hold = DomainHold(self._domains if in_flight is InFlight.EACH_RECIPIENT else None)
        chunks = ChunkRun(
            self._strategy,
            writes,
            hold,
            rendering=rendering,
            sender=draft.newsletter.sender_address,
            deliver_at=deliver_at,
        )
        completed = await chunks.run(recipients)
        if chunks.deferred and chunks.last is not None:
            # Still deferred after the retries inside the batch: the job's next try sends
            # them (later, on a fresh connection); everything else is recorded now.
            await chunks.settle()
            raise RetryLater(f"{chunks.last.provider} deferred {chunks.deferred} recipient(s)")
        if hold.held and completed:
            # Not a failure and no attempt spent: they stay `pending`, and the job comes back
            # for them when their domain has room (SND-25).
            await chunks.settle()
            raise Defer(hold.reason, seconds=hold.wait_seconds)
        last = chunks.last
        status, counts = await writes.finish(
            in_flight, chunks.unsettled, last, batch.recipient_count
        )
        if status == BatchStatus.SUBMITTED:
            send_events.batch_submitted(
                batch.campaign_id,
                batch.id,
                recipient_count=batch.recipient_count,
                submitted_count=counts[RecipientState.SENT],
                submission_excluded_count=counts[RecipientState.EXCLUDED],
                provider_message_id=None if last is None else last.provider_message_id,
            )

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
            send_events.excluded(
                "submission",
                step.campaign_id,
                row.subscriber_id,
                reason.value,
                batch_id=step.batch_id,
            )

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
