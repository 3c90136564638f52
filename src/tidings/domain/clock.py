"""The clock as a value: code that needs `now` is handed one (HOUSE rule 2)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from tidings.domain.errors import InvalidInput

# Returns an aware UTC datetime. Only `bootstrap.utcnow` reads the real clock; tests pass
# their own through `bootstrap.build(settings, clock=...)`.
Clock = Callable[[], datetime]


NEEDS_TIMEZONE = "needs a timezone (e.g. 2026-12-01T09:00:00Z)"


def is_naive(moment: datetime) -> bool:
    """A time without a timezone: whose 9 o'clock would it be? Refused at input."""
    return moment.tzinfo is None or moment.utcoffset() is None


def require_timezone(field: str, moment: datetime | None) -> None:
    """InvalidInput naming `field` for a naive time; None (not set) passes."""
    if moment is not None and is_naive(moment):
        raise InvalidInput(f"{field} {NEEDS_TIMEZONE}", field=field)
