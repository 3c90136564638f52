"""Retry timing is exponential with full jitter, capped, and honours Retry-After (DLV-3)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.backoff import backoff_ceiling, is_exhausted, retry_delay

attempts = st.integers(min_value=1, max_value=10_000)
bases = st.floats(min_value=0.001, max_value=60)
caps = st.floats(min_value=60, max_value=86_400)


@given(attempt=attempts, base=bases, cap=caps, fraction=st.floats(min_value=0, max_value=1))
def test_delay_stays_within_zero_and_the_capped_ceiling(
    attempt: int, base: float, cap: float, fraction: float
) -> None:
    """A delay outside [0, ceiling] either hammers a failing host or parks a job forever."""
    delay = retry_delay(
        attempt,
        base_seconds=base,
        max_seconds=cap,
        uniform=lambda lo, hi: lo + (hi - lo) * fraction,
    )
    ceiling = cap if attempt > 64 else min(cap, base * 2 ** (attempt - 1))
    assert 0 <= delay <= ceiling + 1e-9


@given(attempt=st.integers(min_value=1, max_value=40), base=bases, cap=caps)
def test_ceiling_doubles_until_the_cap(attempt: int, base: float, cap: float) -> None:
    """Exponential growth spreads retries out; the cap bounds the longest wait."""
    now = backoff_ceiling(attempt, base_seconds=base, max_seconds=cap)
    following = backoff_ceiling(attempt + 1, base_seconds=base, max_seconds=cap)
    assert following == min(cap, now * 2) or following == pytest.approx(min(cap, now * 2))


def test_full_jitter_draws_from_zero_to_ceiling() -> None:
    """Full jitter: the lower bound is zero, not half the ceiling."""
    seen: list[tuple[float, float]] = []
    retry_delay(
        4, base_seconds=2, max_seconds=100, uniform=lambda lo, hi: seen.append((lo, hi)) or hi
    )
    assert seen == [(0.0, 16.0)]


@given(attempt=attempts, retry_after=st.floats(min_value=0.1, max_value=1e6))
def test_retry_after_is_a_floor_capped_at_the_maximum(attempt: int, retry_after: float) -> None:
    """Retrying before the server's Retry-After only earns another 429."""
    delay = retry_delay(
        attempt,
        base_seconds=1,
        max_seconds=600,
        uniform=lambda lo, hi: lo,
        retry_after_seconds=retry_after,
    )
    assert delay == min(retry_after, 600)


def test_exhaustion_and_invalid_attempt_numbers() -> None:
    """Attempts are counted from one; a job out of attempts goes dead, never loops."""
    assert not is_exhausted(2, 3)
    assert is_exhausted(3, 3)
    with pytest.raises(ValueError, match="start at 1"):
        backoff_ceiling(0, base_seconds=1, max_seconds=10)
