"""Finalise a send (SPEC SND-14, SND-15): after every batch settled, re-read all of them,
verify the counts against the rows again, and close the campaign as `submitted` with the
verified total — or `failed` with a reason that says whether a retry is safe."""

from __future__ import annotations

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.campaigns import send_events
from tidings.campaigns.context import SendingContext
from tidings.campaigns.control import close_cancelled
from tidings.campaigns.jobs.batch_writes import BatchError
from tidings.campaigns.jobs.payloads import FinaliseCampaign
from tidings.campaigns.verification import check_frozen, check_ownership
from tidings.domain.jobs import Defer
from tidings.domain.sending import (
    ACTIVE,
    BatchCounts,
    BatchStatus,
    CampaignStatus,
    RecipientState,
    SendFailed,
    VerificationFailed,
    check_count,
)
from tidings.queue.job import Job
from tidings.storage.sending import batches as batch_queries
from tidings.storage.sending import campaign_sends as send_queries

log = structlog.get_logger("tidings.campaigns")
LOCK_BUSY_SECONDS = 1.0


class BatchFailed(SendFailed):
    code = "batch_failed"
    title = "Some batches could not be sent"


class OutcomeUncertain(SendFailed):
    code = "batch_outcome_uncertain"
    title = "A batch's outcome is unknown"
    retryable = False


async def fail_campaign(
    context: SendingContext,
    conn: AsyncConnection,
    campaign_id: int,
    error: SendFailed,
) -> None:
    """Record a stopped send: campaign `failed`, the reason, whether to retry, and where —
    read from the batches (submitting once any batch was claimed), not from which job
    step noticed (SND-17)."""
    now = context.now()
    started = await batch_queries.submission_started(conn, campaign_id)
    phase = "submitting" if started else "preparing"
    changed = await send_queries.set_status(
        conn, campaign_id, from_statuses=list(ACTIVE), to_status=CampaignStatus.FAILED, now=now
    )
    if not changed:
        return
    await send_queries.update_send(
        conn,
        campaign_id,
        finished_at=now,
        failed_during=phase,
        error_code=error.code,
        error=error.detail,
        retryable=error.retryable,
        updated_at=now,
    )
    await context.webhooks.publish(
        conn,
        "campaign.failed",
        {"campaign_id": campaign_id, "error_code": error.code, "retryable": error.retryable},
    )
    log.warning("campaign.failed", campaign_id=campaign_id, error_code=error.code, phase=phase)


class FinaliseCampaignHandler:
    def __init__(self, context: SendingContext) -> None:
        self._ctx = context

    async def __call__(self, job: Job) -> None:
        step = FinaliseCampaign.from_job(job)
        token = str(job.claim_token)
        async with self._ctx.queue.fenced(job) as conn:
            send = await send_queries.get(conn, step.campaign_id)
            status = await send_queries.status(conn, step.campaign_id)
            closing = status == CampaignStatus.CANCELLED and send and send.finished_at is None
            if send is None or send.attempt != step.attempt:
                return
            if status != CampaignStatus.SUBMITTING and not closing:
                return
            if not await send_queries.take_lock(
                conn, step.campaign_id, token=token, now=self._ctx.now()
            ):
                # The send job that queued this step (or the last batch's) may still hold
                # the lock for a moment: come back, or nobody closes the campaign.
                log.info("campaign.lock_busy", campaign_id=step.campaign_id)
                raise Defer("the campaign's status lock is busy", seconds=LOCK_BUSY_SECONDS)
        try:
            if closing:  # an operator cancelled the send (SND-23)
                await close_cancelled(self._ctx, job, step.campaign_id)
            else:
                await self._finalise(job, step.campaign_id)
        finally:
            await self._ctx.release_status_lock(job, step.campaign_id)

    async def _finalise(self, job: Job, campaign_id: int) -> None:
        async with self._ctx.queue.fenced(job) as conn:
            if await batch_queries.any_unsettled(conn, campaign_id):
                return  # whoever settles the last batch queues finalise again
            now = self._ctx.now()
            try:
                totals = await self._verify(conn, campaign_id)
                await send_queries.update_send(
                    conn, campaign_id, finished_at=now, updated_at=now, **totals
                )
                await self._check_stored_total(conn, campaign_id, totals["email_count"])
            except SendFailed as exc:
                if isinstance(exc, VerificationFailed):
                    send_events.verification_failed(campaign_id, exc)
                await fail_campaign(self._ctx, conn, campaign_id, exc)
                return
            await send_queries.set_status(
                conn,
                campaign_id,
                from_statuses=[CampaignStatus.SUBMITTING],
                to_status=CampaignStatus.SUBMITTED,
                now=now,
            )
            await self._ctx.webhooks.publish(
                conn,
                "campaign.sent",
                {"campaign_id": campaign_id, "email_count": totals["email_count"]},
            )
        log.info("campaign.submitted", campaign_id=campaign_id, **totals)

    async def _check_stored_total(
        self, conn: AsyncConnection, campaign_id: int, verified: int
    ) -> None:
        """The `email_count` progress and statistics will read, as stored, is the verified
        submitted total: read back before the campaign is declared `submitted`."""
        stored = await send_queries.get(conn, campaign_id)
        check_count(
            "email_recipient_count",
            expected=verified,
            actual=None if stored is None else stored.email_count,
        )

    async def _verify(self, conn: AsyncConnection, campaign_id: int) -> dict[str, int]:
        """Every persisted batch, not only this attempt's: rows per batch equal the stored
        count and the recorded counts, everything settled, candidates all accounted for."""
        send = await send_queries.get(conn, campaign_id)
        assert send is not None
        await check_ownership(conn, campaign_id)
        stored = await batch_queries.list_for(conn, campaign_id)
        if send.prepared_at is not None:
            check_frozen(stored, send.prepared_at)
        states = await batch_queries.states_per_batch(conn, campaign_id)
        failed_batches, uncertain_batches = [], []
        refusal: str | None = None  # a provider's refusal (401: a wrong key), named (SND-26)
        for batch in stored:
            counts = states.get(batch.id, BatchCounts())
            check_count(
                "batch_recipient_count",
                expected=batch.recipient_count,
                actual=counts.total,
                batch_id=batch.id,
            )
            if batch.status == BatchStatus.FAILED.value:
                if batch.error_code == VerificationFailed.code:
                    raise VerificationFailed(
                        "batch_verification_failed",
                        batch_id=batch.id,
                        batch_error=batch.error,
                    )
                failed_batches.append(batch.id)
                if refusal is None and batch.error_code == BatchError.PROVIDER_REFUSED:
                    refusal = batch.error
            elif batch.status == BatchStatus.SUBMITTING.value:
                uncertain_batches.append(batch.id)
            else:
                check_count(
                    "batch_submission_counts",
                    expected=batch.submitted_count,
                    actual=counts[RecipientState.SENT],
                    batch_id=batch.id,
                    recipient_count=batch.recipient_count,
                    submitted_count=batch.submitted_count,
                    submission_excluded_count=batch.submission_excluded_count,
                )
        if uncertain_batches:
            raise OutcomeUncertain(
                f"{len(uncertain_batches)} batch(es) may or may not have been accepted by the "
                "provider (a crash or timeout after the request was sent). Check them at the "
                "provider by Message-ID, then reconcile each one; see docs/sending.md."
            )
        if failed_batches:
            raise BatchFailed(
                f"{len(failed_batches)} batch(es) could not be sent; retrying sends only to "
                "recipients not yet sent." + (f" {refusal}" if refusal else "")
            )
        total = BatchCounts(
            {
                state.value: sum(counts[state] for counts in states.values())
                for state in RecipientState
            }
        )
        excluded = send.preparation_excluded_count or 0
        check_count(
            "preparation_totals",
            expected=send.candidate_count,
            actual=total.total + excluded,
            count_check="recipient_rows",
            candidate_count=send.candidate_count,
            preparation_excluded_count=excluded,
            recipient_count=sum(batch.recipient_count for batch in stored),
        )
        result = {
            "email_count": total[RecipientState.SENT],
            "excluded_count": excluded + total[RecipientState.EXCLUDED],
            "failed_count": total[RecipientState.FAILED],
            "uncertain_count": total[RecipientState.UNCERTAIN],
        }
        send_events.submission_verified(
            campaign_id,
            candidate_count=send.candidate_count or 0,
            submitted_count=result["email_count"],
            excluded_count=result["excluded_count"],
            failed_count=result["failed_count"],
            uncertain_count=result["uncertain_count"],
        )
        return result
