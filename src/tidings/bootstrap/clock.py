"""The production clock: the one place that reads the time (HOUSE rule 2). A module of its own,
so a command that needs only the clock does not load the composition root."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """The current time, timezone-aware (UTC)."""
    return datetime.now(UTC)
