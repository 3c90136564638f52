"""The bounce and complaint policy (AUD-13): what reported delivery events do to an address.

Providers and mailboxes report back in any order and often more than once, so the policy is
a function of the *set* of events seen, never of their arrival order. What is kept per address
(`AddressRecord`) is a merge that is commutative and idempotent, and the verdict is computed
from that record alone:

- a hard bounce suppresses the address site-wide (`hard_bounce`);
- a complaint suppresses it (`complaint`) and unsubscribes it from every newsletter;
- soft bounces are counted: `limit` of them within `window` suppress (`soft_bounce`);
- a delivery clears the soft count: only soft bounces that happened *after* the latest
  reported delivery count (by when they happened, not when they were heard of). A delivery
  reported after the bounces that suppressed an address therefore lifts that soft-bounce
  suppression: the mailbox works again.

When several apply, the strongest reason wins: complaint, then hard bounce, then soft bounce.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum


class EventKind(StrEnum):
    DELIVERED = "delivered"
    SOFT_BOUNCE = "soft_bounce"
    HARD_BOUNCE = "hard_bounce"
    COMPLAINT = "complaint"
    UNSUBSCRIBE = "unsubscribe"


# The suppression reasons this policy sets, weakest first: a stronger one replaces a weaker.
POLICY_REASONS = ("soft_bounce", "hard_bounce", "complaint")
# Soft bounces kept per address (newest first): far above any sensible limit, so a mailbox
# that bounces forever cannot grow its record without bound.
MAX_SOFT_BOUNCES_KEPT = 100


@dataclass(frozen=True, slots=True)
class FeedbackEvent:
    """One reported event about one address. `key` identifies it across repeats
    (`source:provider event id`); `code` is the bounce code (e.g. `550` or `5.1.1`)."""

    kind: EventKind
    occurred_at: datetime
    key: str
    code: str | None = None


@dataclass(frozen=True, slots=True)
class ReportedEvent:
    """An event as a provider, a bridge or a mailbox reported it, in provider-neutral form.
    `kind` None: a kind the policy ignores (opened, clicked...), recorded and counted only.
    `message_id` (without brackets) or `recipient_id` (from a VERP return path) tie it to the
    campaign recipient it is about; `diagnostic` is the remote server's text (stored for the
    operator, never logged: it often echoes the address)."""

    source: str
    event_key: str
    kind: EventKind | None
    address: str | None
    occurred_at: datetime
    code: str | None = None
    diagnostic: str | None = None
    message_id: str | None = None
    recipient_id: int | None = None
    token: str | None = None


@dataclass(frozen=True, slots=True)
class BouncePolicy:
    soft_bounce_limit: int = 3
    soft_bounce_window: timedelta = timedelta(days=15)

    def __post_init__(self) -> None:
        if not 1 <= self.soft_bounce_limit <= MAX_SOFT_BOUNCES_KEPT:
            raise ValueError(f"soft_bounce_limit must be 1 to {MAX_SOFT_BOUNCES_KEPT}")
        if self.soft_bounce_window <= timedelta(0):
            raise ValueError("soft_bounce_window must be positive")


@dataclass(frozen=True, slots=True)
class AddressRecord:
    """What is kept about one address to decide again from any event: the soft bounces since
    the latest delivery (sorted, as `(occurred_at, key)`), that delivery's time, and when the
    first hard bounce and complaint happened."""

    soft_bounces: tuple[tuple[datetime, str], ...] = ()
    last_delivered_at: datetime | None = None
    hard_bounced_at: datetime | None = None
    complained_at: datetime | None = None

    def merged(self, event: FeedbackEvent) -> AddressRecord:
        """This record with `event` folded in: the same result whatever the order of folding,
        and folding one event twice changes nothing."""
        at = event.occurred_at
        if event.kind is EventKind.DELIVERED:
            return replace(self, last_delivered_at=_latest(self.last_delivered_at, at)).pruned()
        if event.kind is EventKind.SOFT_BOUNCE:
            bounces = set(self.soft_bounces) | {(at, event.key)}
            return replace(self, soft_bounces=tuple(sorted(bounces))).pruned()
        if event.kind is EventKind.HARD_BOUNCE:
            return replace(self, hard_bounced_at=_earliest(self.hard_bounced_at, at))
        if event.kind is EventKind.COMPLAINT:
            return replace(self, complained_at=_earliest(self.complained_at, at))
        return self  # an unsubscribe by mail touches subscriptions, not this record

    def pruned(self) -> AddressRecord:
        """Without the soft bounces a later delivery cleared, and at most the newest kept."""
        delivered = self.last_delivered_at
        kept = [b for b in self.soft_bounces if delivered is None or b[0] > delivered]
        return replace(self, soft_bounces=tuple(kept[-MAX_SOFT_BOUNCES_KEPT:]))


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the policy wants for an address: a suppression reason (or none), and whether it
    leaves every newsletter."""

    suppression: str | None
    unsubscribe_everywhere: bool

    @property
    def suppressed(self) -> bool:
        return self.suppression is not None


def verdict(record: AddressRecord, policy: BouncePolicy) -> Verdict:
    if record.complained_at is not None:
        return Verdict("complaint", unsubscribe_everywhere=True)
    if record.hard_bounced_at is not None:
        return Verdict("hard_bounce", unsubscribe_everywhere=False)
    if soft_bounce_run(record, policy):
        return Verdict("soft_bounce", unsubscribe_everywhere=False)
    return Verdict(None, unsubscribe_everywhere=False)


def soft_bounce_run(record: AddressRecord, policy: BouncePolicy) -> bool:
    """True when `limit` counted soft bounces happened within `window` of each other."""
    times = [at for at, _ in record.soft_bounces]
    span = policy.soft_bounce_limit - 1
    return any(
        times[i + span] - times[i] <= policy.soft_bounce_window for i in range(len(times) - span)
    )


def stronger_reason(current: str | None, wanted: str) -> bool:
    """Does the policy reason `wanted` replace the stored `current` one? A reason the policy
    did not set (an admin's, say) is never replaced; a weaker policy reason is."""
    if current is None:
        return True
    if current not in POLICY_REASONS:
        return False
    return POLICY_REASONS.index(wanted) > POLICY_REASONS.index(current)


def _latest(current: datetime | None, at: datetime) -> datetime:
    return at if current is None or at > current else current


def _earliest(current: datetime | None, at: datetime) -> datetime:
    return at if current is None or at < current else current
