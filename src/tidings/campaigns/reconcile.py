"""Reconcile a batch whose outcome is unknown (SPEC SND-13): an operator who looked the batch's
Message-IDs up at the provider records what happened, with a note, audited.

`submitted`: the provider had them — the batch's in-flight and uncertain recipients become
`sent`. `failed`: it did not — they become `failed` (`reconciled_not_sent`), which a retry
sends again. Either way the batch's counts are recounted from its rows. Then the send moves
on by itself: a send still in progress is finalised once nothing else is unsettled; a send
that failed only because of uncertain batches, once none is left, is finalised as
`submitted` (every batch was accepted: a new attempt sends nothing and closes it) or becomes
a retryable `batch_failed` (some batch was not sent: `retry` sends it).
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.campaigns.context import SendingContext
from tidings.campaigns.jobs.finalise_campaign import BatchFailed, OutcomeUncertain
from tidings.campaigns.jobs.payloads import FinaliseCampaign
from tidings.domain.errors import NotFound, TidingsError
from tidings.domain.send_status import RECONCILED_NOT_SENT, RECONCILED_SENT
from tidings.domain.sending import BatchStatus, CampaignStatus, RecipientState
from tidings.storage.sending import batch_claims as claim_queries
from tidings.storage.sending import batches as batch_queries
from tidings.storage.sending import campaign_sends as send_queries
from tidings.storage.sending import interventions
from tidings.storage.sending import send_progress as progress_queries
from tidings.storage.sending import send_repairs as repair_queries
from tidings.storage.sending.batches import BatchRow
from tidings.storage.sending.campaign_sends import SendRow

log = structlog.get_logger("tidings.campaigns")
OUTCOMES = (BatchStatus.SUBMITTED, BatchStatus.FAILED)


class ReconcileRefused(TidingsError):
    code = "reconcile_refused"
    title = "The batch cannot be reconciled"


@dataclass(frozen=True, slots=True)
class Reconciled:
    campaign_id: int
    batch_id: int
    outcome: BatchStatus
    recipients: int  # recipients whose state the decision settled
    campaign_status: CampaignStatus  # after the follow-up
    next_step: str  # what happens now, for the operator
    attempt: int | None = None  # the attempt the follow-up started, if any


class Reconciler:
    def __init__(self, context: SendingContext) -> None:
        self._ctx = context

    async def reconcile(
        self, campaign_id: int, batch_id: int, outcome: BatchStatus, *, note: str, actor: str
    ) -> Reconciled:
        if outcome not in OUTCOMES:
            raise ReconcileRefused("a batch is reconciled as submitted or as failed")
        now = self._ctx.now()
        async with self._ctx.db.write() as conn:
            send, batch = await self._batch(conn, campaign_id, batch_id)
            token = str(batch.claim_token)
            to_state, reason = (
                (RecipientState.SENT, RECONCILED_SENT)
                if outcome == BatchStatus.SUBMITTED
                else (RecipientState.FAILED, RECONCILED_NOT_SENT)
            )
            moved = await claim_queries.move(
                conn,
                batch_id,
                token=token,
                now=now,
                from_states=[RecipientState.UNCERTAIN, RecipientState.SENDING],
                to_state=to_state,
                reason=reason,
            )
            counts = await claim_queries.counts(conn, batch_id)
            failed = outcome == BatchStatus.FAILED
            if not await claim_queries.finish(
                conn,
                batch_id,
                token=token,
                now=now,
                status=outcome,
                counts=counts,
                provider_message_id=batch.provider_message_id,
                error_code=RECONCILED_NOT_SENT if failed else None,
                error=f"reconciled as not sent by {actor}" if failed else None,
            ):
                raise ReconcileRefused(f"batch {batch_id} changed meanwhile; look at it again")
            await interventions.record(
                conn,
                campaign_id,
                action="reconcile",
                actor=actor,
                now=now,
                recipient_count=moved,
                batch_id=batch_id,
                outcome=outcome.value,
                attempt=send.attempt,
                note=note,
            )
            result = await self._follow_up(conn, send, batch_id, outcome, moved)
        log.info(
            "campaign.batch_reconciled",
            campaign_id=campaign_id,
            batch_id=batch_id,
            outcome=outcome.value,
            recipients=moved,
            campaign_status=result.campaign_status.value,
        )
        return result

    async def _batch(
        self, conn: AsyncConnection, campaign_id: int, batch_id: int
    ) -> tuple[SendRow, BatchRow]:
        """The batch, if it is this campaign's and awaits a decision nobody else is making."""
        found = await progress_queries.campaign_send(conn, campaign_id)
        if found is None:
            raise NotFound(f"no campaign with id {campaign_id}")
        batch = await batch_queries.get(conn, batch_id)
        _status, send = found
        if send is None or batch is None or batch.campaign_id != campaign_id:
            raise NotFound(f"campaign {campaign_id} has no batch {batch_id}")
        if batch.status != BatchStatus.SUBMITTING:
            raise ReconcileRefused(
                f"batch {batch_id} is {batch.status}, not submitting: only a batch whose "
                "outcome is unknown can be reconciled"
            )
        if await repair_queries.batch_claim_is_live(conn, batch_id):
            raise ReconcileRefused(
                f"a worker ({batch.claimed_by or 'unknown'}) is submitting batch {batch_id} "
                "right now and will record its outcome; wait for it"
            )
        counts = await claim_queries.counts(conn, batch_id)
        if counts[RecipientState.PENDING]:
            raise ReconcileRefused(
                f"{counts[RecipientState.PENDING]} recipient(s) of batch {batch_id} were never "
                "handed over: the worker that reclaims the batch sends them and settles the "
                "rest (see `tidings jobs list --kind send_batch`); reconcile what is left after"
            )
        return send, batch

    async def _finalise_again(self, conn: AsyncConnection, send: SendRow) -> int:
        """A failed send whose batches were all accepted after all: back to `submitting` in
        a new attempt (a fresh finalise job; the last one ran) whose finalise re-verifies
        every batch and closes it as `submitted`."""
        campaign_id, now = send.campaign_id, self._ctx.now()
        if not await send_queries.set_status(
            conn,
            campaign_id,
            from_statuses=[CampaignStatus.FAILED],
            to_status=CampaignStatus.SUBMITTING,
            now=now,
        ):
            raise ReconcileRefused(f"campaign {campaign_id} changed meanwhile; look again")
        started = await send_queries.start_attempt(
            conn, campaign_id, preflight_email_count=send.preflight_email_count, now=now
        )
        finalise = FinaliseCampaign(campaign_id, started.attempt)
        await self._ctx.queue.enqueue(
            conn, finalise.kind, finalise.idempotency_key, finalise.to_payload()
        )
        return started.attempt

    async def _follow_up(
        self,
        conn: AsyncConnection,
        send: SendRow,
        batch_id: int,
        outcome: BatchStatus,
        moved: int,
    ) -> Reconciled:
        campaign_id = send.campaign_id

        def done(status: CampaignStatus, next_step: str, attempt: int | None = None) -> Reconciled:
            return Reconciled(campaign_id, batch_id, outcome, moved, status, next_step, attempt)

        status = CampaignStatus(str(await send_queries.status(conn, campaign_id)))
        if status == CampaignStatus.SUBMITTING:
            if await batch_queries.any_unsettled(conn, campaign_id):
                return done(status, "the send goes on; it is finalised when its batches settle")
            finalise = FinaliseCampaign(campaign_id, send.attempt)
            await self._ctx.queue.enqueue(
                conn, finalise.kind, finalise.idempotency_key, finalise.to_payload()
            )
            return done(status, "nothing else is unsettled: the send is being finalised")
        if status != CampaignStatus.FAILED or send.error_code != OutcomeUncertain.code:
            return done(status, f"the campaign stays {status.value}")
        left = await repair_queries.submitting_batches(conn, campaign_id)
        if left:
            listed = ", ".join(str(b.id) for b in left)
            return done(status, f"batch(es) {listed} still await a reconcile")
        if not await repair_queries.count_not_submitted(conn, campaign_id):
            attempt = await self._finalise_again(conn, send)
            return done(
                CampaignStatus.SUBMITTING,
                f"every batch was accepted: attempt {attempt} finalises the send as "
                "submitted, sending nothing again",
                attempt,
            )
        error = BatchFailed(
            "some batches were not sent; retrying sends only to recipients not yet sent."
        )
        await send_queries.update_send(
            conn,
            campaign_id,
            error_code=error.code,
            error=error.detail,
            retryable=True,
            updated_at=self._ctx.now(),
        )
        return done(
            status,
            f"the send failed for batches that were not sent; `tidings campaign retry "
            f"{campaign_id}` sends them",
        )
