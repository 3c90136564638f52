"""Retry timing: exponential backoff with full jitter (DLV-3). Pure; randomness is passed in."""

from __future__ import annotations

from collections.abc import Callable

Uniform = Callable[[float, float], float]


def backoff_ceiling(attempt: int, *, base_seconds: float, max_seconds: float) -> float:
    """The largest delay allowed after failed attempt number `attempt` (1-based)."""
    if attempt < 1:
        raise ValueError("attempt numbers start at 1")
    # Cap the exponent first: 2**attempt overflows floats long before it matters.
    exponent = min(attempt - 1, 62)
    return float(min(max_seconds, base_seconds * (2**exponent)))


def retry_delay(
    attempt: int,
    *,
    base_seconds: float,
    max_seconds: float,
    uniform: Uniform,
    retry_after_seconds: float | None = None,
) -> float:
    """Seconds to wait before the next attempt: uniform in [0, ceiling] ("full jitter"), so a
    burst of failures spreads out instead of retrying in lockstep. A server's Retry-After is a
    floor (capped at `max_seconds`): retrying sooner than asked only earns another refusal."""
    delay = uniform(
        0.0, backoff_ceiling(attempt, base_seconds=base_seconds, max_seconds=max_seconds)
    )
    if retry_after_seconds is not None and retry_after_seconds > 0:
        delay = max(delay, min(retry_after_seconds, max_seconds))
    return delay


def is_exhausted(attempts: int, max_attempts: int) -> bool:
    """True when a job that has failed `attempts` times must not be tried again."""
    return attempts >= max_attempts
