"""Campaign sending rules (SPEC §5.2-5.5): states, pages of the audience, warming allocation,
and the verification errors that stop a send. Pure: counts in, decisions out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from tidings.domain.errors import TidingsError


class CampaignStatus(StrEnum):
    DRAFT = "draft"
    SCHEDULED = "scheduled"
    PENDING = "pending"  # a send job is queued or preparing
    SUBMITTING = "submitting"  # prepared; batches are being handed to the provider
    PAUSED = "paused"  # an operator paused it (SND-23): nothing new is handed over
    SUBMITTED = "submitted"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE = frozenset({CampaignStatus.PENDING, CampaignStatus.SUBMITTING})


class BatchStatus(StrEnum):
    PENDING = "pending"
    SUBMITTING = "submitting"  # claimed: outcome being recorded, or unknown after a crash
    SUBMITTED = "submitted"
    FAILED = "failed"
    CANCELLED = "cancelled"  # the send was cancelled before the batch was handed over


class RecipientState(StrEnum):
    PENDING = "pending"
    SENDING = "sending"  # handed over (or about to be); the outcome is not known yet
    SENT = "sent"
    FAILED = "failed"  # with the provider's reason code, permanent or transient
    EXCLUDED = "excluded"  # with a reason; counted, never mailed
    UNCERTAIN = "uncertain"  # was in flight when its worker died: listed, never resent
    CANCELLED = "cancelled"  # the send was cancelled before it was handed over (SND-23)


class Exclusion(StrEnum):
    """Why a candidate or recipient is not mailed (SND-6, SND-10)."""

    MEMBER_NOT_FOUND = "member_not_found"  # deleted since selection (info level)
    INVALID_ADDRESS = "invalid_address"
    CONSENT_WITHDRAWN = "consent_withdrawn"  # unsubscribed or suppressed since selection


# -- pages ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SegmentRange:
    """The candidates of one segment: positions `first` .. `first + count - 1`."""

    segment: str
    first: int
    count: int


@dataclass(frozen=True, slots=True)
class Page:
    """At most one batch: a run of candidate positions in one segment, for one domain."""

    page: int
    segment: str
    first: int
    last: int
    domain: str

    @property
    def size(self) -> int:
        return self.last - self.first + 1


def plan_pages(
    segments: Sequence[SegmentRange],
    *,
    batch_size: int,
    fallback_domain: str,
    warming_domain: str | None = None,
    warming_remaining: int = 0,
) -> list[Page]:
    """Divide candidates into pages (SND-4) that never cross a segment (a batch is one
    message template), allocating the first `warming_remaining` candidates, in candidate
    order, to the warming domain in pages capped at the capacity left (SND-5); the rest go
    to the fallback domain at full size."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    pages: list[Page] = []
    warm_left = warming_remaining if warming_domain else 0
    for segment in segments:
        position, end = segment.first, segment.first + segment.count
        while position < end:
            if warm_left > 0:
                size, domain = min(batch_size, warm_left, end - position), warming_domain
                warm_left -= size
            else:
                size, domain = min(batch_size, end - position), fallback_domain
            assert domain is not None
            pages.append(
                Page(len(pages) + 1, segment.segment, position, position + size - 1, domain)
            )
            position += size
    return pages


# -- verification -----------------------------------------------------------------------

VERIFICATION_CODE = "recipient_verification_failed"


class SendFailed(TidingsError):
    """A send stopped. `retryable` says whether an identical retry could succeed."""

    code = "send_failed"
    title = "The campaign could not be sent"
    retryable: ClassVar[bool] = True


class VerificationFailed(SendFailed):
    """Recipient accounting does not add up (SND-7, SND-14, SND-15): terminal, never retried
    as is. `event` is the SND-16 event name, `facts` its count and identity fields."""

    code = VERIFICATION_CODE
    title = "Recipient verification failed"
    retryable = False

    def __init__(
        self,
        reason: str,
        *,
        expected: int | None = None,
        actual: int | None = None,
        batch_id: int | None = None,
        **facts: Any,
    ) -> None:
        self.reason = reason
        self.expected = expected
        self.actual = actual
        self.batch_id = batch_id
        self.facts = facts
        where = f" in batch {batch_id}" if batch_id is not None else ""
        counts = f": expected {expected}, found {actual}" if expected is not None else ""
        super().__init__(
            f"Sending stopped: recipient verification failed ({reason}){where}{counts}. "
            "Nothing more will be sent for this campaign; an identical retry would fail the "
            "same way. See docs/sending.md, 'Verification failures'."
        )

    @property
    def is_count_mismatch(self) -> bool:
        """A confirmed discrepancy between two known, valid, different counts."""
        return (
            isinstance(self.expected, int)
            and isinstance(self.actual, int)
            and self.expected >= 0
            and self.actual >= 0
            and self.expected != self.actual
        )

    @property
    def event(self) -> str:
        if self.is_count_mismatch:
            return "email.recipient_count.mismatch"
        return "email.verification.failed"

    def fields(self) -> dict[str, Any]:
        values: dict[str, Any] = {"code": self.code, "reason": self.reason, **self.facts}
        if self.batch_id is not None:
            values["batch_id"] = self.batch_id
        if self.expected is not None:
            values["expected"] = self.expected
        if self.actual is not None:
            values["actual"] = self.actual
        return values


def check_count(reason: str, *, expected: int | None, actual: int | None, **facts: Any) -> None:
    """Raise `VerificationFailed` unless both counts are known and equal."""
    if expected is None or actual is None or expected != actual or expected < 0:
        raise VerificationFailed(reason, expected=expected, actual=actual, **facts)


def check_message_counts(
    loaded: int, message_recipients: int, excluded: int, *, batch_id: int, recipient_count: int
) -> None:
    """Before a payload goes out: every recipient loaded for it is either in the message or
    excluded, none lost or doubled on the way (`message_recipient_counts`, SND-10)."""
    check_count(
        "message_recipient_counts",
        expected=loaded,
        actual=message_recipients + excluded,
        batch_id=batch_id,
        recipient_count=recipient_count,
        submission_excluded_count=excluded,
    )


# -- settling ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchCounts:
    """A batch's recipient rows by state, read from the rows (never trusted from columns)."""

    by_state: Mapping[str, int] = field(default_factory=dict)

    def __getitem__(self, state: RecipientState) -> int:
        return int(self.by_state.get(state.value, 0))

    @property
    def total(self) -> int:
        return sum(self.by_state.values())

    @property
    def unsettled(self) -> int:
        return self[RecipientState.PENDING] + self[RecipientState.SENDING]


def batch_outcome(recipient_count: int, counts: BatchCounts, *, batch_id: int) -> BatchStatus:
    """The status a batch whose work is over may record: `submitted` when every recipient is
    settled (sent, failed, excluded or uncertain), checked against its stored count."""
    check_count(
        "batch_submission_counts",
        expected=recipient_count,
        actual=counts.total,
        batch_id=batch_id,
        recipient_count=recipient_count,
        submitted_count=counts[RecipientState.SENT],
        submission_excluded_count=counts[RecipientState.EXCLUDED],
    )
    if counts.unsettled:
        return BatchStatus.SUBMITTING
    return BatchStatus.SUBMITTED


def drift_is_notable(preflight: int, consumed: int) -> bool:
    """SND-7: a preflight estimate off by 1% or more is worth a warning (never a failure)."""
    if preflight == consumed:
        return False
    if preflight == 0:
        return True
    return abs(consumed - preflight) / preflight >= 0.01
