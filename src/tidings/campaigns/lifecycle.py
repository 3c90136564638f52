"""Send now and schedule (SPEC SND-1): each a conditional state change that writes the durable
send job in the same transaction (PRI-6), with the preflight audience count. Cancel, pause and
resume are in `control` (SND-23)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog

from tidings.campaigns.context import SendingContext
from tidings.campaigns.drafts import check_ab
from tidings.campaigns.jobs.payloads import SendCampaign
from tidings.domain.clock import require_timezone
from tidings.domain.errors import Conflict, InvalidInput
from tidings.domain.sending import CampaignStatus
from tidings.storage.sending import batches as batch_queries
from tidings.storage.sending import campaign_sends as send_queries
from tidings.storage.sending import candidates as candidate_queries
from tidings.storage.sending.campaign_sends import SendRow


class EmptyAudience(Conflict):
    """A send or schedule whose audience has nobody to mail: refused, nothing changes."""

    code = "empty_audience"
    title = "Nobody would receive this campaign"


log = structlog.get_logger("tidings.campaigns")
MIN_SCHEDULE_LEAD = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class SendAccepted:
    campaign_id: int
    status: CampaignStatus
    attempt: int
    preflight_email_count: int
    scheduled_at: datetime | None
    job_id: int


class CampaignLifecycle:
    def __init__(self, context: SendingContext) -> None:
        self._ctx = context

    async def send(self, campaign_id: int) -> SendAccepted:
        """Send a draft (or a scheduled campaign) now."""
        return await self._start(campaign_id, at=None)

    async def schedule(self, campaign_id: int, at: datetime) -> SendAccepted:
        """Send a draft at `at` (a scheduled job, due then; not a polling loop)."""
        require_timezone("scheduled_at", at)
        if at < self._ctx.now() + MIN_SCHEDULE_LEAD:
            raise InvalidInput(
                "scheduled_at must be at least 30 seconds in the future", field="scheduled_at"
            )
        return await self._start(campaign_id, at=at)

    async def audience_size(self, campaign_id: int) -> int:
        """Who would get it if sent now: the consent-filtered audience (the preflight count)."""
        draft = await self._ctx.drafts.get(campaign_id)
        async with self._ctx.db.read() as conn:
            return await candidate_queries.count_audience(
                conn,
                draft.newsletter.id,
                draft.audience,
                now=self._ctx.now(),
                campaign_id=campaign_id,
            )

    async def unjudged_count(self, campaign_id: int) -> int | None:
        """For an audience filter with `engaged:`/`unengaged:` terms, how many of the
        newsletter's mailable subscribers cannot be judged by engagement (ENG-7); else None."""
        draft = await self._ctx.drafts.get(campaign_id)
        if not draft.audience.judges_engagement():
            return None
        async with self._ctx.db.read() as conn:
            return await candidate_queries.count_unjudged(conn, draft.newsletter.id)

    async def submission_window(self, campaign_id: int) -> timedelta | None:
        """From the first batch claimed to the last one finished (None before that)."""
        async with self._ctx.db.read() as conn:
            first, last = await batch_queries.submission_window(conn, campaign_id)
        if first is None or last is None:
            return None
        span: timedelta = last - first
        return span

    async def get_send(self, campaign_id: int) -> SendRow | None:
        async with self._ctx.db.read() as conn:
            return await send_queries.get(conn, campaign_id)

    async def _start(self, campaign_id: int, *, at: datetime | None) -> SendAccepted:
        draft = await self._ctx.drafts.get(campaign_id)
        self._ctx.drafts.check_identity(draft)
        # ENG-8: a newsletter whose tracking was turned off since cannot decide a test.
        check_ab(None if draft.ab is None else draft.ab.test, draft.newsletter)
        target = CampaignStatus.SCHEDULED if at else CampaignStatus.PENDING
        allowed = [CampaignStatus.DRAFT] if at else [CampaignStatus.DRAFT, CampaignStatus.SCHEDULED]
        now = self._ctx.now()
        async with self._ctx.db.write() as conn:
            if not await send_queries.set_status(
                conn,
                campaign_id,
                from_statuses=allowed,
                to_status=target,
                now=now,
                scheduled_at=at,
            ):
                raise Conflict(
                    f"a {draft.campaign.status} campaign cannot be "
                    f"{'scheduled' if at else 'sent'}; only a draft"
                    f"{'' if at else ' or a scheduled campaign'} can"
                )
            preflight = await candidate_queries.count_audience(
                conn, draft.newsletter.id, draft.audience, campaign_id=campaign_id
            )
            if preflight == 0:  # the transaction rolls back: the campaign stays as it was
                raise EmptyAudience(
                    f"nobody would receive it: {draft.newsletter.slug} has no confirmed "
                    "subscriber in this audience"
                    + (
                        f" ({draft.campaign.audience_filter})"
                        if draft.campaign.audience_filter
                        else ""
                    )
                )
            earlier = await send_queries.get(conn, campaign_id)
            if earlier is not None:  # a schedule sent now: its waiting job goes (no job left)
                before = SendCampaign(campaign_id, earlier.attempt)
                await self._ctx.queue.withdraw(conn, before.idempotency_key)
            send = await send_queries.start_attempt(
                conn, campaign_id, preflight_email_count=preflight, now=now
            )
            step = SendCampaign(campaign_id, send.attempt)
            job, _ = await self._ctx.queue.enqueue(
                conn, step.kind, step.idempotency_key, step.to_payload(), run_at=at
            )
            await self._ctx.webhooks.publish(
                conn,
                "campaign.scheduled" if at else "campaign.sending",
                {
                    "campaign_id": campaign_id,
                    "preflight_email_count": preflight,
                    "scheduled_at": at.isoformat() if at else None,
                },
            )
        log.info(
            "campaign.send_requested",
            campaign_id=campaign_id,
            scheduled=at is not None,
            preflight_email_count=preflight,
        )
        return SendAccepted(campaign_id, target, send.attempt, preflight, at, job.id)
