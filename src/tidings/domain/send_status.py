"""A send's status, derived on read (SPEC SND-17..19): phase, progress, ETA, recipient totals
and whether a retry may run. Pure: what storage read goes in, the answer comes out.

Active and failed sends are described from their batches only (a few grouped sums, never the
recipient rows); a submitted send from the totals its finalise verified and stored. Progress
counts exclusions as completed work: the numbers are recipients *processed*, not mailed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from tidings.domain.eta import Sample, eta_seconds
from tidings.domain.provider_health import ProviderProblem
from tidings.domain.sending import VERIFICATION_CODE, BatchStatus, CampaignStatus

# A send that has started: it has batches worth reading (a submitted one has its totals).
READS_BATCHES = frozenset(
    {
        CampaignStatus.PENDING,
        CampaignStatus.SUBMITTING,
        CampaignStatus.PAUSED,
        CampaignStatus.FAILED,
    }
)
# Failure reasons that promise nothing was delivered, so a retry or resend may send again:
# the provider's deferrals (a 4xx, or a temporary error past the in-batch retries) and an
# operator's "the provider never had it" (reconcile --as failed).
TRANSIENT_MARKERS = ("_temporary", "_deferred")
# Failures a refusal of the sender wrote before it was told apart (issue 35 item 9): a relay
# refusing authentication (530 required, 535 refused) at MAIL or RCPT, or answering RCPT 554
# (Postfix's code for relay access denied, a blocked client or sender: never the recipient's own
# mailbox). Nothing was delivered to these recipients, so sending again duplicates nothing.
SENDER_REFUSED_REASONS = frozenset(
    {
        "smtp_rejected_530",
        "smtp_rejected_535",
        "smtp_rejected_554",
        "smtp_permanent_530",
        "smtp_permanent_535",
    }
)
RECONCILED_NOT_SENT = "reconciled_not_sent"
RECONCILED_SENT = "reconciled_sent"


class Phase(StrEnum):
    PREPARING = "preparing"  # until any batch has left `pending`
    SUBMITTING = "submitting"


def is_resendable_failure(reason: str | None) -> bool:
    """A failed recipient a retry sends again: transient, never handed over, or refused for
    the sender's sake. Markers match in any case (SQL's LIKE does on SQLite; storage
    lower-cases on both dialects)."""
    if reason is None:
        return False
    folded = reason.lower()
    return (
        reason == RECONCILED_NOT_SENT
        or is_sender_refused_failure(reason)
        or any(marker in folded for marker in TRANSIENT_MARKERS)
    )


def is_sender_refused_failure(reason: str | None) -> bool:
    """A failure that was the relay refusing the sender, not the recipient (issue 35 item 9)."""
    return reason is not None and reason.lower() in SENDER_REFUSED_REASONS


class RetryBlock(StrEnum):
    """Why a retry may not run now."""

    NOT_FAILED = "not_failed"
    VERIFICATION = "verification_failed"  # terminal (SND-15): an identical retry fails again
    BATCHES_SUBMITTING = "batches_submitting"  # the provider may have them: reconcile first


def retry_blocked_by(
    status: CampaignStatus, error_code: str | None, submitting_batches: int
) -> RetryBlock | None:
    """SND-19: a failed send is retryable unless a batch is `submitting` or its error is a
    verification failure. None when a retry may run."""
    if status != CampaignStatus.FAILED:
        return RetryBlock.NOT_FAILED
    if error_code == VERIFICATION_CODE:
        return RetryBlock.VERIFICATION
    if submitting_batches:
        return RetryBlock.BATCHES_SUBMITTING
    return None


@dataclass(frozen=True, slots=True)
class BatchGroup:
    """Sums over a campaign's batches sharing a status (and, for `submitting`, whether an
    uncertain outcome was recorded and awaits an operator). Counts not recorded yet are 0."""

    status: BatchStatus
    awaiting_reconcile: bool
    batches: int
    claimed: int  # batches that ever left `pending` (a retry may have put them back)
    recipients: int  # sum of recipient_count
    positions: int  # candidates their pages covered: recipients + the pages' exclusions
    sent: int = 0
    excluded: int = 0
    failed: int = 0
    uncertain: int = 0
    first_claimed_at: datetime | None = None  # the group's first claim in this attempt
    settled_since: int = 0  # settled by the batches claimed in this attempt

    @property
    def settled(self) -> int:
        return self.sent + self.excluded + self.failed + self.uncertain

    @property
    def owes_work(self) -> bool:
        """Pending, or being submitted (not merely waiting for a reconcile)."""
        if self.status == BatchStatus.PENDING:
            return True
        return self.status == BatchStatus.SUBMITTING and not self.awaiting_reconcile


def phase_of(groups: Sequence[BatchGroup]) -> Phase:
    """`preparing` until any batch has left `pending`, then `submitting`."""
    started = any(g.claimed or g.status != BatchStatus.PENDING for g in groups if g.batches)
    return Phase.SUBMITTING if started else Phase.PREPARING


def phase_started(send: SendRecord, groups: Sequence[BatchGroup], phase: Phase) -> datetime | None:
    """When the phase began in this attempt: preparing at the attempt's start (a scheduled
    send's when it went out), submitting at its first batch claimed."""
    if phase == Phase.PREPARING:
        return send.attempt_started_at
    claims = [g.first_claimed_at for g in groups if g.first_claimed_at is not None]
    return min(claims, default=None)


def submitting_batches(groups: Sequence[BatchGroup]) -> int:
    return sum(g.batches for g in groups if g.status == BatchStatus.SUBMITTING)


@dataclass(frozen=True, slots=True)
class SendRecord:
    """What the campaign's send row says (the numbers a finalise verified, once it has)."""

    attempt: int
    attempt_started_at: datetime
    preflight_email_count: int
    candidate_count: int | None
    preparation_excluded_count: int | None
    prepared_at: datetime | None
    email_count: int | None
    excluded_count: int | None
    failed_count: int | None
    uncertain_count: int | None
    failed_during: str | None
    error_code: str | None
    error: str | None
    cancelled_count: int | None = None  # a cancelled send, once closed (SND-23)


@dataclass(frozen=True, slots=True)
class RecipientTotals:
    sent: int = 0
    failed: int = 0
    excluded: int = 0
    uncertain: int = 0
    cancelled: int = 0

    @property
    def processed(self) -> int:
        return self.sent + self.failed + self.excluded + self.uncertain + self.cancelled


@dataclass(frozen=True, slots=True)
class Progress:
    completed: int
    total: int
    remaining: int  # work left in the phase; failed batches are not remaining until retried


@dataclass(frozen=True, slots=True)
class SendingStatus:
    status: CampaignStatus
    attempt: int | None
    phase: Phase | None  # for a send in progress
    completed: int
    total: int
    eta_seconds: int | None
    failed_during: str | None
    retryable: bool
    error_code: str | None
    error: str | None
    recipients: RecipientTotals
    provider_problem: ProviderProblem | None = None  # a send waiting on its provider (SND-26)
    auto_pause: AutoPaused | None = None  # the send paused itself (SND-24)
    closing: bool = False  # cancelled, its close not run yet: the totals it will record

    @property
    def stage(self) -> str:
        """The one word for where the send is, shown by the badge and the progress panel
        alike so they never disagree: the phase while it runs (`preparing`, `submitting`),
        otherwise the status (a paused send is `paused`, not its phase)."""
        if self.status in (CampaignStatus.PENDING, CampaignStatus.SUBMITTING) and self.phase:
            return self.phase.value
        return self.status.value


@dataclass(frozen=True, slots=True)
class AutoPaused:
    """A send that paused itself on its bounce or complaint rate, and why (figures only)."""

    at: datetime
    reason: str

    def summary(self) -> str:
        return f"Paused automatically at {self.at:%Y-%m-%d %H:%M} UTC: {self.reason}"


def preparation_progress(send: SendRecord, groups: Sequence[BatchGroup]) -> Progress:
    """Candidates written into batches, exclusions included, of the candidates selected (the
    preflight count until selection has counted them)."""
    if send.prepared_at is not None:
        done = sum(g.recipients for g in groups) + (send.preparation_excluded_count or 0)
        return Progress(done, done, 0)
    completed = sum(g.positions for g in groups)
    expected = send.candidate_count
    total = max(expected if expected is not None else send.preflight_email_count, completed)
    return Progress(completed, total, total - completed)


def submission_progress(send: SendRecord, groups: Sequence[BatchGroup]) -> Progress:
    """Recipients settled (sent, failed, excluded, uncertain; preparation exclusions too) of
    every recipient prepared. Remaining: what batches still owing work have not settled."""
    excluded = send.preparation_excluded_count or 0
    total = sum(g.recipients for g in groups) + excluded
    completed = excluded + sum(g.settled for g in groups)
    remaining = sum(g.recipients - g.settled for g in groups if g.owes_work)
    return Progress(completed, total, max(0, remaining))


def _phase_done(
    send: SendRecord, groups: Sequence[BatchGroup], phase: Phase, progress: Progress
) -> int:
    """Work the phase has done: candidates paged, or recipients settled by the batches claimed
    in this attempt (the preparation's exclusions were the other phase's work)."""
    if phase == Phase.PREPARING:
        return progress.completed
    return sum(g.settled_since for g in groups)


def batch_totals(send: SendRecord, groups: Sequence[BatchGroup]) -> RecipientTotals:
    return RecipientTotals(
        sent=sum(g.sent for g in groups),
        failed=sum(g.failed for g in groups),
        excluded=(send.preparation_excluded_count or 0) + sum(g.excluded for g in groups),
        uncertain=sum(g.uncertain for g in groups),
    )


def closed(status: CampaignStatus, send: SendRecord) -> bool:
    """A send whose totals are stored: submitted, or cancelled and closed (SND-23)."""
    if status == CampaignStatus.SUBMITTED:
        return True
    return status == CampaignStatus.CANCELLED and send.cancelled_count is not None


def finished_status(status: CampaignStatus, send: SendRecord) -> SendingStatus:
    """A submitted send, or a cancelled one once closed, from the totals its finalise
    verified: no batch is read."""
    totals = RecipientTotals(
        sent=send.email_count or 0,
        failed=send.failed_count or 0,
        excluded=send.excluded_count or 0,
        uncertain=send.uncertain_count or 0,
        cancelled=send.cancelled_count or 0,
    )
    total = send.candidate_count if send.candidate_count is not None else totals.processed
    return SendingStatus(
        status, send.attempt, None, total, total, 0, None, False, None, None, totals
    )


def closing(status: CampaignStatus, send: SendRecord) -> bool:
    """A cancelled send whose close (the finalise step) has not recorded its totals yet, with
    recipients selected: its numbers come from its batches until then."""
    return (
        status == CampaignStatus.CANCELLED
        and send.cancelled_count is None
        and send.candidate_count is not None
    )


def closing_status(send: SendRecord, groups: Sequence[BatchGroup]) -> SendingStatus:
    """A cancelled send before its close ran: the totals the close will record, so the page
    right after a cancel shows what it shows after a reload. Every recipient a batch still
    owed (not handed over) is counted `cancelled`, as the close will make them."""
    owed = sum(
        g.recipients - g.settled
        for g in groups
        if g.status in (BatchStatus.PENDING, BatchStatus.SUBMITTING)
    )
    totals = dataclasses.replace(batch_totals(send, groups), cancelled=max(0, owed))
    total = send.candidate_count if send.candidate_count is not None else totals.processed
    return SendingStatus(
        CampaignStatus.CANCELLED,
        send.attempt,
        None,
        total,
        total,
        0,
        None,
        False,
        None,
        None,
        totals,
        closing=True,
    )


def idle_status(status: CampaignStatus, send: SendRecord | None) -> SendingStatus:
    """A draft, scheduled or cancelled campaign: nothing in progress."""
    total = send.preflight_email_count if send is not None else 0
    attempt = send.attempt if send is not None else None
    return SendingStatus(
        status, attempt, None, 0, total, None, None, False, None, None, RecipientTotals()
    )


def derive_status(
    status: CampaignStatus,
    send: SendRecord,
    groups: Sequence[BatchGroup],
    samples: Sequence[Sample],
    *,
    now: datetime,
) -> SendingStatus:
    """A send in progress or failed, from its batches. `samples` are the current phase's
    completions (batches written while preparing, finished while submitting)."""
    if closed(status, send):
        return finished_status(status, send)
    if closing(status, send):
        return closing_status(send, groups)
    if status not in READS_BATCHES:
        return idle_status(status, send)
    failed = status == CampaignStatus.FAILED
    paused = status == CampaignStatus.PAUSED
    phase = phase_of(groups)  # a failed send too: where it stopped is in its batches
    progress = (
        preparation_progress(send, groups)
        if phase == Phase.PREPARING
        else submission_progress(send, groups)
    )
    eta = eta_seconds(
        failed=failed or paused,  # a paused send has no ETA either
        remaining=progress.remaining,
        samples=samples,
        attempt_started_at=send.attempt_started_at,
        now=now,
        # The phase's own average (first attempt only: a retry's batches keep the counts of
        # the attempts before it, which this attempt did not do).
        phase_started_at=phase_started(send, groups, phase) if send.attempt == 1 else None,
        phase_done=_phase_done(send, groups, phase, progress),
    )
    blocked = retry_blocked_by(status, send.error_code, submitting_batches(groups))
    return SendingStatus(
        status=status,
        attempt=send.attempt,
        phase=None if failed else phase,
        completed=progress.completed,
        total=progress.total,
        eta_seconds=eta,
        failed_during=phase.value if failed else None,
        retryable=failed and blocked is None,
        error_code=send.error_code if failed else None,
        error=send.error if failed else None,
        recipients=batch_totals(send, groups),
    )
