"""A subscriber's consent to per-person open and click tracking (ENG-1): how it is given,
read from an import, and what giving or withdrawing writes. Pure: `now` is passed in."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from tidings.domain.errors import InvalidInput

# The words shown beside the unticked box on the signup form and the preferences page.
CONSENT_TEXT = (
    "Let us see which emails you open and which links you click (you can change this any time)"
)
FIELD = "tracking_consent"
_YES = frozenset({"true", "yes", "1"})
_NO = frozenset({"false", "no", "0"})


class ConsentSource(StrEnum):
    """How consent was recorded: the person's own box (signup, preferences), or an operator's
    assertion that the person gave it elsewhere (import, api)."""

    SIGNUP = "signup"
    PREFERENCES = "preferences"
    IMPORT = "import"
    API = "api"


@dataclass(frozen=True, slots=True)
class TrackingConsent:
    """The two columns on the subscriber row: both set (given), or both None (not given)."""

    at: datetime | None = None
    source: str | None = None

    @property
    def given(self) -> bool:
        return self.at is not None


def parse_flag(value: str) -> bool | None:
    """An import cell: true/false, yes/no, 1/0 in any case; empty means "not said" (None)."""
    cleaned = value.strip().lower()
    if not cleaned:
        return None
    if cleaned in _YES:
        return True
    if cleaned in _NO:
        return False
    raise InvalidInput("tracking_consent must be true, false, yes, no, 1 or 0", field=FIELD)


def change(
    current: TrackingConsent, wanted: bool, *, source: ConsentSource, now: datetime
) -> TrackingConsent | None:
    """What to write when consent is `wanted` (given) or not (withdrawn), or None when the
    row already says so: consent given earlier keeps its first time and source, so asking
    again never rewrites the record of when and how it was given."""
    if wanted == current.given:
        return None
    return TrackingConsent(now, source.value) if wanted else TrackingConsent()
