"""Auto-pause (SPEC SND-24): after a hard bounce or a complaint is recorded for one of a
sending campaign's recipients, the campaign's figures are checked against the policy
(`domain/auto_pause.py`) and, past a threshold, the send pauses itself — in the transaction
that recorded the event, through the operator's own pause (SND-23), by `system:auto-pause`
with the reason. It then waits for an operator to resume or cancel it.

Cheap per event: the counts are one row per campaign and the messages handed over are summed
from the campaign's batch rows (one per batch); no recipient row is counted. Deliveries, the
bulk of all events, never come here.
"""

from __future__ import annotations

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.campaigns.context import SendingContext
from tidings.campaigns.control import PAUSABLE, SendControl
from tidings.domain.auto_pause import AutoPausePolicy, auto_pause_reason
from tidings.storage.sending import campaign_sends as send_queries
from tidings.storage.sending import feedback_counts

log = structlog.get_logger("tidings.campaigns")
AUTO_PAUSE_ACTOR = "system:auto-pause"


class AutoPause:
    def __init__(
        self, context: SendingContext, control: SendControl, policy: AutoPausePolicy
    ) -> None:
        self._ctx = context
        self._control = control
        self.policy = policy

    async def check(self, conn: AsyncConnection, campaign_id: int) -> str | None:
        """Pause the campaign if its figures since the last resume pass a threshold; returns
        the reason when it paused. A campaign not sending is left alone."""
        if not self.policy.enabled:
            return None
        if await send_queries.status(conn, campaign_id) not in PAUSABLE:
            return None
        watch = await feedback_counts.watch(conn, campaign_id)
        reason = auto_pause_reason(watch.now.since(watch.baseline), self.policy)
        if reason is None:
            return None
        await self._control.pause_in(conn, campaign_id, actor=AUTO_PAUSE_ACTOR, reason=reason)
        await feedback_counts.mark_auto_paused(
            conn, campaign_id, reason=reason, now=self._ctx.now()
        )
        log.warning(
            "campaign.paused", campaign_id=campaign_id, actor=AUTO_PAUSE_ACTOR, reason=reason
        )
        return reason
