"""Fixed-window rate-limit arithmetic: which window an instant falls in, and how long is left."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta


def window_start(now: datetime, window_seconds: int) -> datetime:
    """The start of the fixed window holding `now` (windows are aligned to the epoch)."""
    return datetime.fromtimestamp(
        math.floor(now.timestamp() / window_seconds) * window_seconds, UTC
    )


def retry_after_seconds(now: datetime, window_seconds: int) -> int:
    """Whole seconds until the window holding `now` ends, at least 1 (a Retry-After value)."""
    end = window_start(now, window_seconds) + timedelta(seconds=window_seconds)
    return max(1, math.ceil((end - now).total_seconds()))
