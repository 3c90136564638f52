"""Pause, resume and cancel a send in progress (SPEC SND-23), each a conditional state change
recorded as a send intervention with who and when, in the same transaction; and unschedule, a
scheduled campaign back to draft with its waiting job removed (issue 38 item 2).

Pause: the campaign becomes `paused`. Workers look at the status in the write that marks each
chunk in flight (and a preparing send at each page), so a chunk already handed over finishes
and is recorded, and nothing new goes out; each batch is given back `pending`. Recovery and
the sweep resume `pending` and `submitting` sends only, so a paused one waits for an operator.

Resume: `paused -> pending`, and the attempt's own `send_campaign` job is made due again: the
one send handler re-verifies the frozen recipients (or starts an unfinished preparation over)
and dispatches the batches still owing work — the same attempt, nobody selected again.

Cancel: the campaign becomes `cancelled` and the attempt's finalise step is queued. It waits
until no live worker holds a batch, then turns every recipient never handed over `cancelled`
and verifies the accounting: candidates = sent + failed + uncertain + excluded + cancelled.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.campaigns import send_events
from tidings.campaigns.context import SendingContext
from tidings.campaigns.jobs.payloads import FinaliseCampaign, SendCampaign
from tidings.domain.errors import Conflict, NotFound
from tidings.domain.jobs import Defer
from tidings.domain.sending import (
    BatchCounts,
    CampaignStatus,
    RecipientState,
    VerificationFailed,
    check_count,
)
from tidings.queue.job import Job
from tidings.storage.sending import batches as batch_queries
from tidings.storage.sending import campaign_sends as send_queries
from tidings.storage.sending import feedback_counts, interventions
from tidings.storage.sending import send_control as control_queries

log = structlog.get_logger("tidings.campaigns")
PAUSABLE = (CampaignStatus.PENDING, CampaignStatus.SUBMITTING)
CANCELLABLE_SEND = (CampaignStatus.PENDING, CampaignStatus.SUBMITTING, CampaignStatus.PAUSED)
CLAIM_WAIT_SECONDS = 0.5
OPERATOR_REASON = "operator"  # the webhook's `reason` of an operator's action


@dataclass(frozen=True, slots=True)
class ControlApplied:
    campaign_id: int
    action: str  # pause | resume | cancel | unschedule
    status: CampaignStatus  # after the action
    attempt: int | None  # the send's attempt (None: a draft or scheduled one called off)


class SendControl:
    def __init__(self, context: SendingContext) -> None:
        self._ctx = context

    async def pause(
        self, campaign_id: int, *, actor: str, reason: str = OPERATOR_REASON
    ) -> ControlApplied:
        """Stop handing over at the next chunk; the send waits, paused, for resume or cancel."""
        async with self._ctx.db.write() as conn:
            return await self.pause_in(conn, campaign_id, actor=actor, reason=reason)

    async def pause_in(
        self, conn: AsyncConnection, campaign_id: int, *, actor: str, reason: str
    ) -> ControlApplied:
        """`pause` in the caller's transaction (the auto-pause pauses in the one recording
        the event that tripped it)."""
        return await self._change_in(
            conn, campaign_id, "pause", PAUSABLE, CampaignStatus.PAUSED, actor=actor, reason=reason
        )

    async def resume(self, campaign_id: int, *, actor: str) -> ControlApplied:
        """Carry a paused send on, in the same attempt, from the same frozen recipients. After
        an auto-pause, its thresholds apply to what happens from now on (SND-24)."""
        async with self._ctx.db.write() as conn:
            applied = await self._change_in(
                conn,
                campaign_id,
                "resume",
                (CampaignStatus.PAUSED,),
                CampaignStatus.PENDING,
                actor=actor,
                reason=OPERATOR_REASON,
            )
            watch = await feedback_counts.watch(conn, campaign_id)
            await feedback_counts.rebase(conn, campaign_id, watch.now)
        return applied

    async def cancel(self, campaign_id: int, *, actor: str) -> ControlApplied:
        """Cancel a draft, a scheduled campaign, or a send in progress or paused."""
        async with self._ctx.db.write() as conn:
            return await self._change_in(
                conn,
                campaign_id,
                "cancel",
                CANCELLABLE_SEND,
                CampaignStatus.CANCELLED,
                actor=actor,
                reason=OPERATOR_REASON,
            )

    async def unschedule(self, campaign_id: int, *, actor: str) -> ControlApplied:
        """Put a scheduled campaign back to draft and remove its waiting send job, in one
        transaction: nothing is sent, nothing is left queued, and the draft can be edited,
        scheduled again or sent. Refused (409) for any other state, a schedule whose time
        came (its job took it: it is a send now) included."""
        async with self._ctx.db.write() as conn:
            status = await send_queries.status(conn, campaign_id)
            if status is None:
                raise NotFound(f"no campaign with id {campaign_id}")
            if not await send_queries.set_status(
                conn,
                campaign_id,
                from_statuses=[CampaignStatus.SCHEDULED],
                to_status=CampaignStatus.DRAFT,
                now=self._ctx.now(),
            ):
                raise Conflict(
                    f"a {status} campaign cannot be unscheduled; only a scheduled one can"
                    + (" (it is sending now: pause or cancel it)" if status in PAUSABLE else "")
                )
            removed = await self._withdraw_scheduled(conn, campaign_id)
        log.info("campaign.unscheduled", campaign_id=campaign_id, jobs_removed=removed)
        return ControlApplied(campaign_id, "unschedule", CampaignStatus.DRAFT, None)

    async def _withdraw_scheduled(self, conn: AsyncConnection, campaign_id: int) -> int:
        """Remove the waiting `send_campaign` job of the campaign's current attempt."""
        send = await send_queries.get(conn, campaign_id)
        if send is None:
            return 0
        step = SendCampaign(campaign_id, send.attempt)
        return await self._ctx.queue.withdraw(conn, step.idempotency_key)

    async def _change_in(
        self,
        conn: AsyncConnection,
        campaign_id: int,
        action: str,
        from_statuses: tuple[CampaignStatus, ...],
        to_status: CampaignStatus,
        *,
        actor: str,
        reason: str,
    ) -> ControlApplied:
        now = self._ctx.now()
        status = await send_queries.status(conn, campaign_id)
        if status is None:
            raise NotFound(f"no campaign with id {campaign_id}")
        if action == "cancel" and status in (CampaignStatus.DRAFT, CampaignStatus.SCHEDULED):
            await send_queries.set_status(
                conn,
                campaign_id,
                from_statuses=[CampaignStatus(status)],
                to_status=CampaignStatus.CANCELLED,
                now=now,
            )
            scheduled = await send_queries.get(conn, campaign_id)
            if scheduled is not None:  # a scheduled send: who called it off, and when
                await self._withdraw_scheduled(conn, campaign_id)  # no job left behind
                await interventions.record(
                    conn,
                    campaign_id,
                    action=action,
                    actor=actor,
                    now=now,
                    recipient_count=0,
                    attempt=scheduled.attempt,
                )
            log.info("campaign.cancelled", campaign_id=campaign_id, was=status)
            return ControlApplied(campaign_id, action, CampaignStatus.CANCELLED, None)
        if not await send_queries.set_status(
            conn,
            campaign_id,
            from_statuses=list(from_statuses),
            to_status=to_status,
            now=now,
            keep_schedule=True,
        ):
            raise Conflict(_refusal(action, status))
        send = await send_queries.get(conn, campaign_id)
        assert send is not None
        await interventions.record(
            conn,
            campaign_id,
            action=action,
            actor=actor,
            now=now,
            recipient_count=0,
            attempt=send.attempt,
            note=None if reason == OPERATOR_REASON else reason,
        )
        await self._follow_up(conn, campaign_id, action, send.attempt)
        await self._ctx.webhooks.publish(
            conn,
            {"pause": "campaign.paused", "resume": "campaign.resumed"}.get(
                action, "campaign.cancelled"
            ),
            {"campaign_id": campaign_id, "attempt": send.attempt, "was": status, "reason": reason},
        )
        log.info(f"campaign.{action}_requested", campaign_id=campaign_id, was=status)
        return ControlApplied(campaign_id, action, to_status, send.attempt)

    async def _follow_up(
        self, conn: AsyncConnection, campaign_id: int, action: str, attempt: int
    ) -> None:
        """Resume makes the attempt's send job due again (the one send handler carries on);
        cancel queues the step that closes the send once no worker holds a batch."""
        step: SendCampaign | FinaliseCampaign
        if action == "resume":
            step = SendCampaign(campaign_id, attempt)
        elif action == "cancel":
            step = FinaliseCampaign(campaign_id, attempt)
        else:
            return
        await self._ctx.queue.enqueue(
            conn, step.kind, step.idempotency_key, step.to_payload(), revive=True
        )


def _refusal(action: str, status: str) -> str:
    if action == "pause":
        return f"a {status} campaign cannot be paused; only a send in progress can"
    if action == "resume":
        return f"a {status} campaign cannot be resumed; only a paused send can"
    return f"a {status} campaign cannot be cancelled; it is no longer sending"


async def close_cancelled(context: SendingContext, job: Job, campaign_id: int) -> None:
    """The finalise step of a cancelled send: once no live worker holds a batch (each gives
    its batch back at its next chunk), settle what a dead worker left, cancel everyone never
    handed over, and verify and record the totals. Deferred while a batch is held."""
    async with context.queue.fenced(job) as conn:
        if await control_queries.live_claims(conn, campaign_id):
            raise Defer(
                "a worker still holds a batch of the cancelled send", seconds=CLAIM_WAIT_SECONDS
            )
        now = context.now()
        uncertain = await control_queries.close_stale_claims(conn, campaign_id, now=now)
        cancelled = await control_queries.cancel_unsent(conn, campaign_id, now=now)
        send = await send_queries.get(conn, campaign_id)
        assert send is not None
        states = await batch_queries.states_per_batch(conn, campaign_id)
        total = BatchCounts(
            {
                state.value: sum(counts[state] for counts in states.values())
                for state in RecipientState
            }
        )
        excluded = send.preparation_excluded_count or 0
        error: dict[str, object] = {}
        if send.prepared_at is not None:
            try:  # every candidate accounted for, the cancelled ones included (PRI-1)
                check_count(
                    "preparation_totals",
                    expected=send.candidate_count,
                    actual=total.total + excluded,
                    count_check="cancelled_send",
                    candidate_count=send.candidate_count,
                    preparation_excluded_count=excluded,
                )
            except VerificationFailed as exc:
                send_events.verification_failed(campaign_id, exc)
                error = {"error_code": exc.code, "error": exc.detail, "retryable": False}
        await send_queries.update_send(
            conn,
            campaign_id,
            email_count=total[RecipientState.SENT],
            excluded_count=excluded + total[RecipientState.EXCLUDED],
            failed_count=total[RecipientState.FAILED],
            uncertain_count=total[RecipientState.UNCERTAIN],
            cancelled_count=total[RecipientState.CANCELLED],
            finished_at=now,
            updated_at=now,
            **error,
        )
    log.info(
        "campaign.cancel_closed",
        campaign_id=campaign_id,
        cancelled=cancelled,
        sent=total[RecipientState.SENT],
        uncertain=total[RecipientState.UNCERTAIN],
        made_uncertain=uncertain,
    )
