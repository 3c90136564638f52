"""The `send_batch` job (SPEC §5.4): claim one batch, read and check its recipients, re-assert
consent, exclude what cannot be sent, hand the rest to the provider, and record absolute counts
with the batch's status. Any worker serving the campaign queue takes batches (ARC-5).

Every write is fenced twice: by the job's claim (`JobQueue.fenced`) and by the batch's own
claim token in the statement, so a worker that lost its lease changes nothing.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from datetime import datetime
from typing import NamedTuple

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.campaigns import events
from tidings.campaigns.batch_handover import OUTCOME_UNCERTAIN, PROVIDER_REFUSED
from tidings.campaigns.batch_writes import BatchWrites, SendHalted
from tidings.campaigns.context import SendingContext
from tidings.campaigns.drafts import CampaignDraft
from tidings.campaigns.handover import Delivery, Handover, HandoverResult, HandoverStopped
from tidings.campaigns.jobs import FinaliseCampaign, SendBatch
from tidings.domain import tokens
from tidings.domain.email_headers import check_address
from tidings.domain.errors import InvalidInput
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
from tidings.queue.job import Job
from tidings.rendering import RecipientValues, SegmentRendering
from tidings.storage import batches as batch_queries
from tidings.storage import campaign_sends as send_queries
from tidings.storage import recipients as recipient_queries
from tidings.storage.batches import BatchRow
from tidings.storage.recipients import RecipientRow

log = structlog.get_logger("tidings.campaigns")
RENDER_CACHE_SIZE = 16
BATCH_ERROR = "batch_error"


class Renderings:
    """Each worker reads a campaign and renders each segment once, and keeps them for the send
    (CMP-3)."""

    def __init__(self, context: SendingContext) -> None:
        self._ctx = context
        self._cache: OrderedDict[tuple[int, datetime, str, str], SegmentRendering] = OrderedDict()
        self._drafts: dict[int, CampaignDraft] = {}

    async def draft(self, campaign_id: int) -> CampaignDraft:
        """The campaign as this worker first read it for the send: its content cannot change
        once sending started (only drafts are editable), so one read serves every batch."""
        found = self._drafts.get(campaign_id)
        if found is None:
            found = await self._ctx.drafts.get(campaign_id)
            if len(self._drafts) >= RENDER_CACHE_SIZE:
                self._drafts.clear()
            self._drafts[campaign_id] = found
        return found

    def get(self, draft: CampaignDraft, segment: str, domain: str) -> SegmentRendering:
        key = (draft.campaign.id, draft.campaign.updated_at, segment, domain)
        found = self._cache.get(key)
        if found is None:
            found = self._ctx.drafts.render_for_send(draft, segment, domain)
            self._cache[key] = found
            while len(self._cache) > RENDER_CACHE_SIZE:
                self._cache.popitem(last=False)
        self._cache.move_to_end(key)
        return found


class Claimed(NamedTuple):
    """A batch this worker holds, as read in the claiming transaction."""

    draft: CampaignDraft
    batch: BatchRow
    rows: list[RecipientRow]
    deliver_at: datetime | None


class BatchSubmitter:
    def __init__(self, context: SendingContext, handover: Handover, *, worker: str = "") -> None:
        self._ctx = context
        self._handover = handover
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
                except HandoverStopped:
                    await self._release(job, step)
                    raise Defer("the worker is shutting down", seconds=0) from None
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
            if await send_queries.status(conn, step.campaign_id) != CampaignStatus.SUBMITTING:
                return None
            outcome, _previous = await recipient_queries.claim(
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
                uncertain = await recipient_queries.move(
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
                    await recipient_queries.finish(
                        conn,
                        batch.id,
                        token=token,
                        now=self._ctx.now(),
                        status=BatchStatus.SUBMITTING,
                        counts=await recipient_queries.counts(conn, batch.id),
                        error_code=OUTCOME_UNCERTAIN,
                        error="The worker sending this batch stopped after the request may have "
                        "reached the provider. Reconcile it before any retry.",
                    )
                    return None
            rows = await recipient_queries.load(conn, batch.id, draft.newsletter.id)
            deliver_at = await self._deliver_at(conn, batch)
        return Claimed(draft, batch, rows, deliver_at)

    async def _submit(self, job: Job, step: SendBatch, claimed: Claimed) -> None:
        draft, batch, rows, deliver_at = claimed
        check_count(
            "batch_recipient_read",
            expected=batch.recipient_count,
            actual=len(rows),
            batch_id=batch.id,
        )
        pending = [row for row in rows if row.state == RecipientState.PENDING.value]
        exclusions, sendable = _screen(pending)
        _check_unique_addresses(batch, sendable)
        rendering = self._renderings.get(draft, batch.segment, batch.sending_domain)
        deliveries = [Delivery(row.id, self._values(row)) for row in sendable]
        check_message_counts(
            len(pending),
            len(deliveries),
            len(exclusions),
            batch_id=batch.id,
            recipient_count=batch.recipient_count,
        )
        writes = BatchWrites(self._ctx, job, batch.id, batch.campaign_id, draft.newsletter.id)
        await self._exclude(writes, step, exclusions)
        handed = await self._handover.deliver(
            rendering, draft.newsletter.sender_address, deliveries, writes, deliver_at=deliver_at
        )
        await self._finish(writes, batch, handed)

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

    async def _finish(self, writes: BatchWrites, batch: BatchRow, handed: HandoverResult) -> None:
        async def record(conn: AsyncConnection) -> tuple[BatchStatus, BatchCounts]:
            now = self._ctx.now()
            await recipient_queries.settle(
                conn,
                batch.id,
                handed.outcomes,
                token=writes.token,
                now=now,
                from_state=handed.settle_from,
            )
            if handed.rest_sent:
                await recipient_queries.move(
                    conn,
                    batch.id,
                    token=writes.token,
                    now=now,
                    from_states=[handed.settle_from],
                    to_state=RecipientState.SENT,
                )
            counts = await recipient_queries.counts(conn, batch.id)
            if handed.error_code == OUTCOME_UNCERTAIN:
                status = BatchStatus.SUBMITTING  # left for an operator to reconcile
            elif handed.error_code == PROVIDER_REFUSED:
                status = BatchStatus.FAILED
            else:
                status = batch_outcome(batch.recipient_count, counts, batch_id=batch.id)
            await recipient_queries.finish(
                conn,
                batch.id,
                token=writes.token,
                now=self._ctx.now(),
                status=status,
                counts=counts,
                provider_message_id=handed.provider_message_id,
                error_code=handed.error_code,
                error=handed.error,
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
                provider_message_id=handed.provider_message_id,
            )

    def _values(self, row: RecipientRow) -> RecipientValues:
        secret = self._ctx.secret()
        assert row.email
        assert row.subscriber_id
        assert row.subscription_id
        assert row.subscriber_created_at
        assert row.subscription_created_at
        return RecipientValues(
            address=row.email,
            name=row.name,
            # Naming the recipient row: an unsubscribe counts for this campaign (SND-27).
            unsubscribe_token=tokens.sign(
                secret,
                "unsubscribe",
                row.subscription_id,
                row.subscription_created_at,
                recipient_id=row.id,
            ),
            preferences_token=tokens.sign(
                secret, "preferences", row.subscriber_id, row.subscriber_created_at
            ),
            subscriber_id=str(row.subscriber_id),
            recipient_id=str(row.id),
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
            counts = await recipient_queries.counts(conn, step.batch_id)
            await recipient_queries.finish(
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
                released = await recipient_queries.release(
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
                await recipient_queries.move(
                    conn,
                    step.batch_id,
                    token=token,
                    now=now,
                    from_states=[RecipientState.SENDING],
                    to_state=RecipientState.UNCERTAIN,
                    reason="in_flight_at_error",
                )
                await recipient_queries.release(
                    conn,
                    step.batch_id,
                    token=token,
                    now=now,
                    error_code=BATCH_ERROR,
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
            if await batch_queries.count_unsettled(conn, step.campaign_id):
                return
        async with self._ctx.db.write() as conn:
            finalise = FinaliseCampaign(step.campaign_id, step.attempt)
            await self._ctx.queue.enqueue(
                conn, finalise.kind, finalise.idempotency_key, finalise.to_payload()
            )


def _screen(
    pending: list[RecipientRow],
) -> tuple[list[tuple[RecipientRow, Exclusion]], list[RecipientRow]]:
    """SND-10: who may still be mailed. Gone since selection, consent withdrawn (either half
    of AUD-4, or suppressed — evaluated in SQL), or an address that cannot be sent to."""
    exclusions: list[tuple[RecipientRow, Exclusion]] = []
    sendable: list[RecipientRow] = []
    for row in pending:
        if row.subscriber_id is None or row.email is None:
            exclusions.append((row, Exclusion.MEMBER_NOT_FOUND))
        elif not row.mailable:
            exclusions.append((row, Exclusion.CONSENT_WITHDRAWN))
        else:
            try:
                check_address("to", row.email)
            except InvalidInput:
                exclusions.append((row, Exclusion.INVALID_ADDRESS))
                continue
            sendable.append(row)
    return exclusions, sendable


def _check_unique_addresses(batch: BatchRow, sendable: list[RecipientRow]) -> None:
    """Two recipients collapsing to one address would mail one person twice, or drop one:
    fail before any provider call (SND-10)."""
    unique = {str(row.email).lower() for row in sendable}
    check_count(
        "provider_payload_count", expected=len(sendable), actual=len(unique), batch_id=batch.id
    )
