"""Reading a send's status (SPEC SND-17, SND-18) and listing its recipients by state (SND-13).

The status is cheap enough to poll: the campaign and its send row in one statement; for a send
in progress or failed, its batches summed by status and the ETA's few timing samples; for a
submitted one, nothing more. No recipient row is read on this path.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields

from tidings.campaigns.context import SendingContext
from tidings.domain.email_headers import message_id
from tidings.domain.errors import NotFound
from tidings.domain.eta import WINDOW, Sample
from tidings.domain.provider_health import PROVIDER_PAUSE_ACTOR, ProviderProblem, provider_problem
from tidings.domain.send_status import (
    READS_BATCHES,
    AutoPaused,
    SendingStatus,
    SendRecord,
    closed,
    closing,
    derive_status,
    finished_status,
    idle_status,
    phase_of,
)
from tidings.domain.sending import CampaignStatus, RecipientState
from tidings.storage.sending import campaign_sends as send_queries
from tidings.storage.sending import feedback_counts, interventions, recipient_list
from tidings.storage.sending import send_control as control_queries
from tidings.storage.sending import send_progress as progress_queries
from tidings.storage.sending.campaign_sends import SendRow

_RECORD_FIELDS = [field.name for field in fields(SendRecord)]


@dataclass(frozen=True, slots=True)
class CampaignRecipient:
    """One recipient as an operator looks it up at the provider."""

    id: int
    batch_id: int | None
    subscriber_id: int | None
    address: str | None  # None after a privacy delete
    message_id: str | None  # None without an address or a batch (never handed over)
    state: str
    reason: str | None


def _record(send: SendRow) -> SendRecord:
    return SendRecord(**{name: getattr(send, name) for name in _RECORD_FIELDS})


class SendStatusReader:
    def __init__(self, context: SendingContext) -> None:
        self._ctx = context

    async def status(self, campaign_id: int) -> SendingStatus:
        found = await self._status(campaign_id)
        if found.status != CampaignStatus.PAUSED:
            return found
        async with self._ctx.db.read() as conn:
            paused = (await feedback_counts.auto_paused(conn, [campaign_id])).get(campaign_id)
            refused = await interventions.paused_by(conn, PROVIDER_PAUSE_ACTOR, [campaign_id])
        if refused:  # the provider refused the sender: the send paused itself (SND-26)
            found = dataclasses.replace(found, provider_problem=_paused_problem(refused[0][2]))
        if paused is None:
            return found
        return dataclasses.replace(found, auto_pause=AutoPaused(*paused))

    async def auto_paused(self) -> list[tuple[int, AutoPaused]]:
        """Every send that paused itself on its bounce or complaint rate and waits for an
        operator (SND-24), by campaign: the dashboard's banner."""
        async with self._ctx.db.read() as conn:
            found = await feedback_counts.paused_by_policy(conn)
        return [(campaign_id, AutoPaused(at, reason)) for campaign_id, (at, reason) in found]

    async def _status(self, campaign_id: int) -> SendingStatus:
        now = self._ctx.now()
        async with self._ctx.db.read() as conn:
            found = await progress_queries.campaign_send(conn, campaign_id)
            if found is None:
                raise NotFound(f"no campaign with id {campaign_id}")
            status, send = CampaignStatus(found[0]), found[1]
            if send is None:
                return idle_status(status, None)
            record = _record(send)
            if closed(status, record):
                return finished_status(status, record)
            if status not in READS_BATCHES and not closing(status, record):
                return idle_status(status, record)
            groups = await progress_queries.batch_groups(
                conn, campaign_id, since=send.attempt_started_at
            )
            samples: list[Sample] = []
            if status in READS_BATCHES and status != CampaignStatus.FAILED:  # an ETA's samples
                samples = await progress_queries.timing_samples(
                    conn,
                    campaign_id,
                    phase_of(groups),
                    since=send.attempt_started_at,
                    window_start=now - WINDOW,
                )
            trouble = None
            if status in (CampaignStatus.PENDING, CampaignStatus.SUBMITTING):
                trouble = await control_queries.batch_job_trouble(conn, campaign_id, send.attempt)
        derived = derive_status(status, record, groups, samples, now=now)
        if trouble is None:
            return derived
        return dataclasses.replace(derived, provider_problem=_problem(trouble))

    async def provider_problems(self) -> list[tuple[int, ProviderProblem]]:
        """Every send waiting on an unreachable provider, or paused because its provider
        refused the sender (SND-26), by campaign: the dashboard's banner. A handful of sends
        at most are active at any time."""
        found: list[tuple[int, ProviderProblem]] = []
        async with self._ctx.db.read() as conn:
            for campaign_id, _at, reason in await interventions.paused_by(
                conn, PROVIDER_PAUSE_ACTOR
            ):
                paused = _paused_problem(reason)
                if paused is not None:
                    found.append((campaign_id, paused))
            for send in await send_queries.active(conn):
                trouble = await control_queries.batch_job_trouble(
                    conn, send.campaign_id, send.attempt
                )
                problem = _problem(trouble)
                if problem is not None:
                    found.append((send.campaign_id, problem))
        return found

    async def recipients(
        self, campaign_id: int, state: RecipientState, *, after_id: int | None, limit: int
    ) -> list[CampaignRecipient]:
        """A page of the campaign's recipients in `state`, by id, with each one's Message-ID
        (CMP-4: `<campaign>.<hash of campaign:address>@<its batch's sending domain>`)."""
        async with self._ctx.db.read() as conn:
            if await progress_queries.campaign_send(conn, campaign_id) is None:
                raise NotFound(f"no campaign with id {campaign_id}")
            rows = await recipient_list.page(
                conn, campaign_id, state, after_id=after_id, limit=limit
            )
        return [
            CampaignRecipient(
                id=row.id,
                batch_id=row.batch_id,
                subscriber_id=row.subscriber_id,
                address=row.address,
                message_id=(
                    message_id(str(campaign_id), row.address, row.sending_domain)
                    if row.address and row.sending_domain
                    else None
                ),
                state=row.state,
                reason=row.reason,
            )
            for row in rows
        ]


def _paused_problem(reason: str) -> ProviderProblem | None:
    return provider_problem(reason, attempts=0, max_attempts=0, next_try=None)


def _problem(trouble: control_queries.JobTrouble | None) -> ProviderProblem | None:
    if trouble is None:
        return None
    return provider_problem(
        trouble.last_error,
        attempts=trouble.attempts,
        max_attempts=trouble.max_attempts,
        next_try=trouble.run_at,
    )
