"""Consent, decided in one place (AUD-4..7, AUD-9): a subscription's state and an event in,
the new state with its evidence (or a refusal) out. Pure: callers read the row, decide here,
then write what was decided. `storage/consent.py` is the same predicate as SQL, and a property
test drives both, with these transitions, through the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from tidings.domain.audience import Source

MAX_EVIDENCE_LENGTH = 200


class SubscriptionState(StrEnum):
    PENDING = "pending"  # waiting for the confirmation link to be used
    CONFIRMED = "confirmed"
    UNSUBSCRIBED = "unsubscribed"


def state_of(*, confirmed: bool, unsubscribed: bool) -> SubscriptionState:
    if unsubscribed:
        return SubscriptionState.UNSUBSCRIBED
    return SubscriptionState.CONFIRMED if confirmed else SubscriptionState.PENDING


def subscription_state(
    confirmed_at: datetime | None, unsubscribed_at: datetime | None
) -> SubscriptionState:
    return state_of(confirmed=confirmed_at is not None, unsubscribed=unsubscribed_at is not None)


def is_mailable(
    confirmed_at: datetime | None, unsubscribed_at: datetime | None, suppressed: bool
) -> bool:
    """AUD-4, both halves plus suppression: the send-time re-check. Checking only
    `unsubscribed_at` is a bug: subscribe is public and clears both stamps when it revives."""
    confirmed = subscription_state(confirmed_at, unsubscribed_at) is SubscriptionState.CONFIRMED
    return confirmed and not suppressed


# -- events ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Subscribe:
    """Someone asked to subscribe (the public form, the API, an admin without an assertion)."""

    source: Source
    double_opt_in: bool


@dataclass(frozen=True, slots=True)
class ConfirmByLink:
    """The confirmation link was used; `origin` is the client address, if known."""

    origin: str | None


@dataclass(frozen=True, slots=True)
class SubscribeInPreferences:
    """A newsletter ticked on the preferences page. The page is reached by a link in an email,
    and emails get forwarded: the tick alone is not the person's consent (AUD-7)."""


@dataclass(frozen=True, slots=True)
class AssertConsent:
    """An admin asserts the person consented (`actor` is the API key id)."""

    actor: str


@dataclass(frozen=True, slots=True)
class Import:
    """A CSV row asks for `wanted`; confirmed is the importing admin's assertion (AUD-9)."""

    wanted: SubscriptionState
    evidence: str
    suppressed: bool


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    """The person (one-click, preferences), an admin or an import ended the subscription."""


Event = Subscribe | ConfirmByLink | SubscribeInPreferences | AssertConsent | Import | Unsubscribe


# -- decisions ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Transition:
    """What to write. `before` is None for a subscription that does not exist yet."""

    before: SubscriptionState | None
    after: SubscriptionState
    evidence: str | None = None  # recorded with a new confirmation
    ask_to_confirm: bool = False  # queue a confirmation email (double opt-in)

    @property
    def creates(self) -> bool:
        return self.before is None

    @property
    def revives(self) -> bool:
        """Unsubscribed -> active: both stamps are cleared, the history kept (AUD-5)."""
        unsubscribed = SubscriptionState.UNSUBSCRIBED
        return self.before is unsubscribed and self.after is not unsubscribed

    @property
    def confirms(self) -> bool:
        return self.after is SubscriptionState.CONFIRMED and self.before is not self.after

    @property
    def unsubscribes(self) -> bool:
        return self.after is SubscriptionState.UNSUBSCRIBED and self.before is not self.after

    @property
    def changed(self) -> bool:
        return self.before is not self.after or self.ask_to_confirm


@dataclass(frozen=True, slots=True)
class Refusal:
    """The event cannot apply: the person unsubscribed since, and only they may undo it."""

    reason: str


def decide(before: SubscriptionState | None, event: Event) -> Transition | Refusal:
    """The one definition of every consent transition."""
    pending, confirmed, unsubscribed = SubscriptionState
    active = before in (pending, confirmed)
    match event:
        case Subscribe(source=source, double_opt_in=double_opt_in):
            if before is confirmed:
                return Transition(before, confirmed)  # already confirmed: nothing changes
            # Single opt-in never applies to a revive: subscribe is public, so without a
            # confirmation anyone could undo a person's own unsubscribe.
            if not double_opt_in and before is not unsubscribed:
                return Transition(before, confirmed, _evidence(f"single_opt_in:{source}"))
            return Transition(before, pending, ask_to_confirm=True)
        case ConfirmByLink(origin=origin):
            if not active:
                return Refusal("the subscription was left since the link was sent")
            return _confirmed(before, f"link:{origin or 'unknown'}")
        case SubscribeInPreferences():
            # Whoever holds a forwarded email must not sign its recipient up: a newsletter not
            # yet confirmed gets a confirmation email (double opt-in, whatever the list's
            # setting). One already confirmed, or already waiting for its link, is left alone.
            if before is confirmed or before is pending:
                return Transition(before, before)
            return Transition(before, pending, ask_to_confirm=True)
        case AssertConsent(actor=actor):
            if before is unsubscribed:
                return Refusal("the subscriber unsubscribed; only they can undo that")
            return _confirmed(before, f"admin:{actor}")
        case Import(wanted=wanted, evidence=evidence, suppressed=suppressed):
            return _imported(before, wanted, _evidence(evidence), suppressed)
        case Unsubscribe():
            if before is None:
                return Refusal("not subscribed")
            return Transition(before, unsubscribed)  # idempotent: the history counts once
    raise AssertionError(f"unhandled consent event {event!r}")


def _imported(
    before: SubscriptionState | None, wanted: SubscriptionState, evidence: str, suppressed: bool
) -> Transition:
    """An import only adds or ends consent; a person's own unsubscribe is never overridden."""
    pending, confirmed, unsubscribed = SubscriptionState
    if before is unsubscribed:
        return Transition(before, unsubscribed)
    if wanted is confirmed and suppressed:
        wanted = pending if before is None else before  # suppressed: asserted consent waits
    if before is None or wanted is unsubscribed:
        return Transition(before, wanted, evidence if wanted is confirmed else None)
    if wanted is confirmed and before is pending:
        return Transition(before, confirmed, evidence)
    return Transition(before, before)


def _confirmed(before: SubscriptionState | None, evidence: str) -> Transition:
    if before is SubscriptionState.CONFIRMED:
        return Transition(before, before)  # confirming twice changes nothing more
    return Transition(before, SubscriptionState.CONFIRMED, _evidence(evidence))


def _evidence(text: str) -> str:
    return text[:MAX_EVIDENCE_LENGTH]
