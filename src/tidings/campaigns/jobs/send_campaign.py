"""The `send_campaign` job (SPEC SND-2, SND-8): take the campaign's status lock, prepare the
recipients unless a verified preparation exists (then reuse it, never selecting again), and
queue one `send_batch` job per unfinished batch for any worker to take.

"The job returned" never means "the email was sent": the campaign status records the outcome.
"""

from __future__ import annotations

import structlog

from tidings.campaigns import send_events
from tidings.campaigns.ab_tests import hold_remainder
from tidings.campaigns.context import SendingContext
from tidings.campaigns.jobs.finalise_campaign import fail_campaign
from tidings.campaigns.jobs.payloads import CampaignJob, FinaliseCampaign, SendBatch, SendCampaign
from tidings.campaigns.preparation import Preparation, PreparationInterrupted
from tidings.domain.jobs import Defer
from tidings.domain.sending import CampaignStatus, SendFailed, VerificationFailed
from tidings.queue.job import Job
from tidings.storage import ab_tests as ab_queries
from tidings.storage.sending import batches as batch_queries
from tidings.storage.sending import campaign_sends as send_queries

log = structlog.get_logger("tidings.campaigns")
DISPATCH_CHUNK = 500


class SendCampaignHandler:
    def __init__(self, context: SendingContext) -> None:
        self._ctx = context
        self._preparation = Preparation(context)

    async def __call__(self, job: Job) -> None:
        step = SendCampaign.from_job(job)
        with structlog.contextvars.bound_contextvars(campaign_id=step.campaign_id):
            if not await self._lock(job, step):
                return
            try:
                await self._run(job, step)
            finally:
                await self._ctx.release_status_lock(job, step.campaign_id)

    async def _lock(self, job: Job, step: SendCampaign) -> bool:
        """SND-2: a competing job or a stale retry returns here without effect."""
        now = self._ctx.now()
        async with self._ctx.queue.fenced(job) as conn:
            send = await send_queries.get(conn, step.campaign_id)
            if send is None or send.attempt != step.attempt:
                return False
            # A scheduled campaign's job runs at its time: it is now a send, started now (its
            # "started", "took" and the ETA's samples count from here, not from when it was
            # scheduled).
            if await send_queries.set_status(
                conn,
                step.campaign_id,
                from_statuses=[CampaignStatus.SCHEDULED],
                to_status=CampaignStatus.PENDING,
                now=now,
                keep_schedule=True,
            ):
                await send_queries.update_send(
                    conn, step.campaign_id, attempt_started_at=now, updated_at=now
                )
            status = await send_queries.status(conn, step.campaign_id)
            if status not in (CampaignStatus.PENDING, CampaignStatus.SUBMITTING):
                return False
            if not await send_queries.take_lock(
                conn, step.campaign_id, token=str(job.claim_token), now=now
            ):
                log.info("campaign.lock_busy")
                return False
        return True

    async def _run(self, job: Job, step: SendCampaign) -> None:
        draft = await self._ctx.drafts.get(step.campaign_id)
        async with self._ctx.db.read() as conn:
            send = await send_queries.get(conn, step.campaign_id)
        assert send is not None
        try:
            if send.prepared_at is None:
                await self._preparation.prepare(job, draft, send)
            else:
                await self._preparation.reverify(job, send)
                log.info("campaign.preparation_reused")
            await self._preparation.drop_candidates(job, step.campaign_id)
            await self._dispatch(job, step)
        except PreparationInterrupted:
            # Shutdown (SND-21): not a failure. Due again at once, no attempt spent; the
            # next run (another worker, or this one restarted) starts the preparation over.
            raise Defer("the worker is shutting down", seconds=0) from None
        except SendFailed as exc:
            if isinstance(exc, VerificationFailed):
                send_events.verification_failed(step.campaign_id, exc)
            async with self._ctx.queue.fenced(job) as conn:
                await fail_campaign(self._ctx, conn, step.campaign_id, exc)

    async def _dispatch(self, job: Job, step: SendCampaign) -> None:
        """Mark the campaign `submitting` and queue every batch still owing work (submitted
        ones are skipped), in bounded transactions; with nothing left, queue the finalise step.

        A resumed send (SND-20, SND-22) comes through here too: a batch job or finalise job of
        this attempt that already finished (died, say) is made due again rather than skipped
        as a duplicate. The status lock is released in the last of these transactions, so a
        finalise step that the last batch queues can always take it."""
        async with self._ctx.queue.fenced(job) as conn:
            await send_queries.set_status(
                conn,
                step.campaign_id,
                from_statuses=[CampaignStatus.PENDING],
                to_status=CampaignStatus.SUBMITTING,
                now=self._ctx.now(),
                keep_schedule=True,
            )
            if await send_queries.status(conn, step.campaign_id) != CampaignStatus.SUBMITTING:
                # Paused or cancelled while it was being prepared (SND-23): nothing is
                # dispatched; resume dispatches, cancel's finalise step closes it.
                log.info("campaign.dispatch_halted")
                return
            ab = await ab_queries.get(conn, step.campaign_id)
            held = ab is not None and not ab.decided
            if ab is not None and held:
                # ENG-8: only the test share goes now; the decision job releases the rest.
                batch_ids = await hold_remainder(
                    self._ctx, conn, step.campaign_id, step.attempt, ab
                )
            else:
                batch_ids = await batch_queries.unfinished_ids(conn, step.campaign_id)
        steps: list[CampaignJob] = [SendBatch(step.campaign_id, b, step.attempt) for b in batch_ids]
        if not steps and not held:
            steps = [FinaliseCampaign(step.campaign_id, step.attempt)]
        for start in range(0, len(steps), DISPATCH_CHUNK):
            chunk = steps[start : start + DISPATCH_CHUNK]
            async with self._ctx.queue.fenced(job) as conn:
                for queued in chunk:
                    await self._ctx.queue.enqueue(
                        conn, queued.kind, queued.idempotency_key, queued.to_payload(), revive=True
                    )
                if start + DISPATCH_CHUNK >= len(steps):
                    await send_queries.release_lock(
                        conn, step.campaign_id, token=str(job.claim_token)
                    )
        log.info("campaign.dispatched", batches=len(batch_ids))
