"""Retry and resend (SPEC SND-13, SND-19): start the next attempt of a finished send, reusing
its frozen preparation, for the recipients that may still be mailed.

A retry runs on a failed send unless a batch is `submitting` (the provider may have it:
reconcile first) or the failure is a verification failure (terminal, SND-15). Failed batches
go back to `pending`, and so do recipients whose failure was transient or a refusal of the
sender (`SENDER_REFUSED_REASONS`: the relay refused us, not them); `sent`, `excluded`,
permanently failed and `uncertain` recipients are never touched. A send that ended
`submitted` with recipients failed by a refusal of the sender (as sends did before such a
refusal paused them) may be retried too: nobody else is sent to again. A resend is the operator's
explicit, audited choice to send again to the `uncertain` (or transiently failed) ones.

Either way the state change, the audit row and the `send_campaign` job of the new attempt
are one transaction (PRI-6): if the request returned, the attempt will run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.campaigns.context import SendingContext
from tidings.campaigns.jobs.payloads import SendCampaign
from tidings.domain.errors import Conflict, NotFound, TidingsError
from tidings.domain.send_status import RetryBlock, retry_blocked_by
from tidings.domain.sending import CampaignStatus, RecipientState
from tidings.storage.sending import campaign_sends as send_queries
from tidings.storage.sending import interventions
from tidings.storage.sending import send_progress as progress_queries
from tidings.storage.sending import send_repairs as repair_queries
from tidings.storage.sending.campaign_sends import SendRow

log = structlog.get_logger("tidings.campaigns")


class RetryRefused(TidingsError):
    """The send cannot be retried now; `detail` says why and what to do instead."""

    code = "retry_refused"
    title = "The campaign cannot be retried now"

    def __init__(self, detail: str, *, batch_ids: list[int] | None = None) -> None:
        super().__init__(detail)
        self.batch_ids = batch_ids or []

    def problem_fields(self) -> dict[str, Any]:
        return {"batch_ids": self.batch_ids} if self.batch_ids else {}


class ResendRefused(RetryRefused):
    code = "resend_refused"
    title = "Nothing can be resent now"


@dataclass(frozen=True, slots=True)
class AttemptStarted:
    campaign_id: int
    attempt: int
    job_id: int
    batches: int  # batches put back to pending
    recipients: int  # recipients the attempt will send to (all still `pending`)


def explain(
    block: RetryBlock, campaign_id: int, status: str, batch_ids: list[int], verb: str
) -> RetryRefused:
    """The refusal for `block`, saying what to do instead."""
    if block == RetryBlock.NOT_FAILED:
        return RetryRefused(f"campaign {campaign_id} is {status}: only a failed send can be {verb}")
    if block == RetryBlock.VERIFICATION:
        return RetryRefused(
            f"campaign {campaign_id} stopped because recipient verification failed: its counts "
            "or ownership do not add up, and an identical retry would fail the same way. "
            "Investigate first (docs/sending.md, 'Verification failures')."
        )
    listed = ", ".join(str(batch_id) for batch_id in batch_ids)
    return RetryRefused(
        f"batch(es) {listed} of campaign {campaign_id} are still submitting: the provider may "
        "have accepted them, and sending again could mail those recipients twice. Look their "
        f"Message-IDs up at the provider (`tidings campaign recipients {campaign_id} --state "
        f"uncertain`), then decide each with `tidings campaign reconcile {campaign_id} --batch "
        "ID --as submitted|failed --note TEXT`; reconcile decides them first, then retry.",
        batch_ids=batch_ids,
    )


async def start_next_attempt(
    context: SendingContext,
    conn: AsyncConnection,
    campaign_id: int,
    send: SendRow,
    *,
    from_status: CampaignStatus,
) -> tuple[int, int]:
    """Campaign back to `pending`, the next attempt recorded with its start time, and its
    `send_campaign` job queued, in the caller's transaction. Returns (attempt, job id)."""
    now = context.now()
    if not await send_queries.set_status(
        conn,
        campaign_id,
        from_statuses=[from_status],
        to_status=CampaignStatus.PENDING,
        now=now,
    ):
        raise Conflict(f"campaign {campaign_id} changed meanwhile; look at its status again")
    started = await send_queries.start_attempt(
        conn, campaign_id, preflight_email_count=send.preflight_email_count, now=now
    )
    step = SendCampaign(campaign_id, started.attempt)
    job, _ = await context.queue.enqueue(conn, step.kind, step.idempotency_key, step.to_payload())
    await context.webhooks.publish(
        conn,
        "campaign.sending",
        {
            "campaign_id": campaign_id,
            "attempt": started.attempt,
            "preflight_email_count": send.preflight_email_count,
            "scheduled_at": None,
        },
    )
    return started.attempt, job.id


class SendRetries:
    def __init__(self, context: SendingContext) -> None:
        self._ctx = context

    async def retry(self, campaign_id: int, *, actor: str) -> AttemptStarted:
        """SND-19: the next attempt of a failed send, for failed batches and transiently
        failed recipients. Refused (nothing changes) when a retry is not safe."""
        async with self._ctx.db.write() as conn:
            status, send = await self._campaign(conn, campaign_id, RetryRefused)
            if not (
                status == CampaignStatus.SUBMITTED
                and await repair_queries.count_sender_refused(conn, campaign_id)
            ):
                await self._check(conn, campaign_id, status, send, verb="retried")
            started = await self._restart(
                conn, send, status, [RecipientState.FAILED], action="retry", actor=actor
            )
        log.info("campaign.retried", campaign_id=campaign_id, attempt=started.attempt)
        return started

    async def resend(
        self, campaign_id: int, state: RecipientState, *, note: str, actor: str
    ) -> AttemptStarted:
        """Send again to the `uncertain` (or transiently `failed`) recipients of a finished
        send: the operator's explicit choice, audited. On a failed send this includes what
        a retry does (it is the next attempt either way)."""
        if state not in repair_queries.RESENDABLE_STATES:
            raise ResendRefused("only uncertain or failed recipients can be resent")
        async with self._ctx.db.write() as conn:
            status, send = await self._campaign(conn, campaign_id, ResendRefused)
            if status == CampaignStatus.FAILED:
                await self._check(
                    conn, campaign_id, status, send, verb="resent", refusal=ResendRefused
                )
                states = [state, RecipientState.FAILED]
            elif status == CampaignStatus.SUBMITTED:
                states = [state]
            else:
                raise ResendRefused(
                    f"campaign {campaign_id} is {status}: resend once its send has finished"
                )
            if not await repair_queries.count_resendable(conn, campaign_id, [state]):
                which = "uncertain" if state == RecipientState.UNCERTAIN else "transiently failed"
                raise ResendRefused(
                    f"campaign {campaign_id} has no {which} recipients to resend to"
                )
            started = await self._restart(
                conn, send, status, states, action="resend", actor=actor, note=note, outcome=state
            )
        log.info(
            "campaign.resent",
            campaign_id=campaign_id,
            attempt=started.attempt,
            state=state.value,
            recipients=started.recipients,
        )
        return started

    async def resendable_count(self, campaign_id: int, state: RecipientState) -> int:
        """How many recipients a resend of `state` would send to (for a confirmation)."""
        async with self._ctx.db.read() as conn:
            await self._campaign(conn, campaign_id, ResendRefused)
            return await repair_queries.count_resendable(conn, campaign_id, [state])

    async def _campaign(
        self, conn: AsyncConnection, campaign_id: int, refusal: type[RetryRefused]
    ) -> tuple[CampaignStatus, SendRow]:
        found = await progress_queries.campaign_send(conn, campaign_id)
        if found is None:
            raise NotFound(f"no campaign with id {campaign_id}")
        status, send = found
        if send is None:
            raise refusal(f"campaign {campaign_id} is {status}: it has never been sent")
        return CampaignStatus(status), send

    async def _check(
        self,
        conn: AsyncConnection,
        campaign_id: int,
        status: CampaignStatus,
        send: SendRow,
        *,
        verb: str,
        refusal: type[RetryRefused] = RetryRefused,
    ) -> None:
        submitting = await repair_queries.submitting_batches(conn, campaign_id)
        block = retry_blocked_by(status, send.error_code, len(submitting))
        if block is not None:
            reason = explain(block, campaign_id, status, [b.id for b in submitting], verb)
            raise refusal(reason.detail, batch_ids=reason.batch_ids)

    async def _restart(
        self,
        conn: AsyncConnection,
        send: SendRow,
        status: CampaignStatus,
        states: list[RecipientState],
        *,
        action: str,
        actor: str,
        note: str | None = None,
        outcome: RecipientState | None = None,
    ) -> AttemptStarted:
        """`states`' resendable recipients and the batches holding them (a failed send's
        failed batches too) back to `pending`, the next attempt queued, the audit row."""
        campaign_id, now = send.campaign_id, self._ctx.now()
        await repair_queries.requeue_recipients(conn, campaign_id, states, now=now)
        batches = await repair_queries.requeue_batches(
            conn, campaign_id, include_failed=status == CampaignStatus.FAILED, now=now
        )
        # What the attempt will actually send to: the recipients moved back, and those a
        # failed batch never handed over (SND-19: the number reported is the number queued).
        recipients = await repair_queries.count_pending(conn, campaign_id)
        attempt, job_id = await start_next_attempt(
            self._ctx, conn, campaign_id, send, from_status=status
        )
        await interventions.record(
            conn,
            campaign_id,
            action=action,
            actor=actor,
            now=now,
            recipient_count=recipients,
            outcome=outcome.value if outcome else None,
            attempt=attempt,
            note=note,
        )
        return AttemptStarted(campaign_id, attempt, job_id, batches, recipients)
