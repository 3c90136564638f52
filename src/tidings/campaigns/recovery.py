"""Resuming interrupted sends (SPEC SND-20, SND-22): when workers start, and then every
`bulk_email.sweep_interval_seconds`, find each campaign left `pending` or `submitting` with no
live job of its current attempt and hand it back to the one send handler.

"No live job": none of the attempt's `send_campaign`, `send_batch` or `finalise_campaign`
jobs is pending (due now or later, a retry's backoff included) or running (a running job whose
worker died is the claim loop's to reclaim, not ours). Such a send is in nobody's hands: its
jobs died, or returned with work left. It is resumed by making its `send_campaign` job due
again — the same row, kept with its history, or a new one if it was pruned — and that handler
does the rest as it always does: it reuses a saved preparation (or starts it over), skips
submitted batches and makes the jobs of the unfinished ones due again. There is no second
resume path. A send older than `bulk_email.resume_max_age` is logged and left for an operator.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import structlog

from tidings.campaigns.context import SendingContext
from tidings.campaigns.jobs.payloads import SEND_KINDS, SendCampaign, live_key_patterns
from tidings.storage.sending import campaign_sends as send_queries
from tidings.storage.sending.campaign_sends import ActiveSend

log = structlog.get_logger("tidings.campaigns")


class SendRecovery:
    def __init__(self, context: SendingContext, *, max_age: timedelta) -> None:
        self._ctx = context
        self._max_age = max_age
        self._reported: set[tuple[int, int]] = set()  # too old: logged once per process

    async def sweep(self) -> int:
        """Resume every interrupted send young enough; returns how many were resumed."""
        async with self._ctx.db.read() as conn:
            active = await send_queries.active(conn)
        resumed = 0
        for send in active:
            if await self._resume(send):
                resumed += 1
        return resumed

    async def _resume(self, send: ActiveSend) -> bool:
        now = self._ctx.now()
        step = SendCampaign(send.campaign_id, send.attempt)
        # One write transaction for the check and the re-arm: on SQLite the single writer makes
        # them atomic. On PostgreSQL a job finishing in between costs at most one extra run of
        # the send handler, which finds the campaign's status lock or its state and returns.
        async with self._ctx.db.write() as conn:
            live = await self._ctx.queue.live_keys(
                conn,
                kinds=SEND_KINDS,
                key_patterns=live_key_patterns(send.campaign_id, send.attempt),
            )
            if live:
                return False
            age = now - started_at(send)
            if age > self._max_age:
                self._report_too_old(send, age)
                return False
            job, rearmed = await self._ctx.queue.enqueue(
                conn, step.kind, step.idempotency_key, step.to_payload(), revive=True
            )
        if not rearmed:  # another worker's sweep got there first
            return False
        log.warning(
            "campaign.send_resumed",
            campaign_id=send.campaign_id,
            attempt=send.attempt,
            status=send.status,
            prepared=send.prepared_at is not None,
            job_id=job.id,
        )
        return True

    def _report_too_old(self, send: ActiveSend, age: timedelta) -> None:
        if (send.campaign_id, send.attempt) in self._reported:
            return
        self._reported.add((send.campaign_id, send.attempt))
        log.warning(
            "campaign.send_not_resumed",
            campaign_id=send.campaign_id,
            attempt=send.attempt,
            status=send.status,
            age_hours=round(age.total_seconds() / 3600, 1),
            max_age_hours=round(self._max_age.total_seconds() / 3600, 1),
            reason="older_than_resume_max_age",
        )


def started_at(send: ActiveSend) -> datetime:
    """When the send began: the attempt's start, or the schedule time for a scheduled one
    (its attempt started when it was scheduled, perhaps days before it was due)."""
    if send.scheduled_at is not None and send.scheduled_at > send.attempt_started_at:
        return send.scheduled_at
    return send.attempt_started_at
