"""GCRA arithmetic of the shared send rate (PRV-5): the window bound, waits, cool-down, chunks."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.send_rate import SAME_INSTANT, SendRate, next_chunk

rates = st.floats(min_value=0.5, max_value=5_000)
bursts = st.integers(min_value=1, max_value=200)
# Times stay small so float rounding cannot blur a comparison the test relies on.
moments = st.floats(min_value=0, max_value=10_000)


@st.composite
def limits(draw: st.DrawFn) -> SendRate:
    burst = draw(bursts)
    return SendRate.of(
        draw(rates), burst=burst, chunk=draw(st.integers(min_value=1, max_value=burst))
    )


@given(
    rate=limits(),
    steps=st.lists(
        st.tuples(st.floats(min_value=0, max_value=0.5), st.integers(min_value=1, max_value=300)),
        min_size=1,
        max_size=60,
    ),
)
def test_reservations_in_any_window_stay_within_rate_times_length_plus_burst(
    rate: SendRate, steps: list[tuple[float, int]]
) -> None:
    """This bound is what a provider's rate limit sees; breaking it earns 429s for everyone."""
    granted: list[tuple[float, int]] = []
    arrival, now = 0.0, 0.0
    for gap, permits in steps:
        now += gap
        moved = rate.arrival_after(arrival, now, permits)
        if moved is not None:
            arrival = moved
            granted.append((now, permits))
    for first, (start, _) in enumerate(granted):
        in_window = 0
        largest = 0
        for at, permits in granted[first:]:
            in_window += permits
            largest = max(largest, permits)
            limit = rate.per_second * (at - start + SAME_INSTANT) + max(rate.burst, largest)
            assert in_window <= limit * (1 + 1e-9)


@given(rate=limits(), now=moments)
def test_an_idle_provider_grants_exactly_its_burst_at_once(rate: SendRate, now: float) -> None:
    """After a quiet spell the burst is ready, and not a permit more, however long the quiet."""
    arrival = 0.0
    for _ in range(rate.burst):
        moved = rate.arrival_after(arrival, now, 1)
        assert moved is not None
        arrival = moved
    assert rate.arrival_after(arrival, now, 1) is None


@given(
    rate=limits(),
    arrival=moments,
    now=moments,
    cooldown_until=moments,
    permits=st.integers(min_value=1, max_value=300),
)
def test_the_wait_ends_exactly_when_the_reservation_is_allowed(
    rate: SendRate, arrival: float, now: float, cooldown_until: float, permits: int
) -> None:
    """A worker sleeps for this long; too short hammers the row, too long wastes the rate."""
    wait = rate.wait_seconds(
        arrival=arrival, cooldown_until=cooldown_until, now=now, permits=permits
    )
    assert wait >= 0
    then = now + wait
    assert cooldown_until <= then + 1e-9
    assert rate.arrival_after(arrival, then + 1e-9, permits) is not None
    if wait > 1e-6 and cooldown_until < now + wait - 1e-6:
        assert rate.arrival_after(arrival, then - 1e-6, permits) is None


@given(rate=limits(), arrival=moments, until=moments, after=st.floats(min_value=0, max_value=100))
def test_after_a_cool_down_sending_resumes_at_the_rate_without_a_burst(
    rate: SendRate, arrival: float, until: float, after: float
) -> None:
    """A provider that just answered 429 must not receive a full burst the moment it relents."""
    arrival = max(arrival, until + rate.resume_offset)
    now = until + after
    taken = 0
    while (moved := rate.arrival_after(arrival, now, 1)) is not None:
        arrival = moved
        taken += 1
    assert taken <= math.floor((after + SAME_INSTANT) * rate.per_second * (1 + 1e-9))


@given(rate=limits(), permits=st.integers(min_value=1, max_value=1_000))
def test_a_reservation_larger_than_the_burst_needs_an_idle_provider(
    rate: SendRate, permits: int
) -> None:
    """An oversized batch must still go out once, not wait forever, and then be paid for."""
    now = 1_000.0
    assert rate.arrival_after(0.0, now, permits) is not None
    busy = now + rate.interval / 2  # half a permit still owed
    if permits >= rate.burst:
        assert rate.arrival_after(busy, now, permits) is None


@given(
    previous=st.integers(min_value=1, max_value=10_000),
    used=st.integers(min_value=0, max_value=10_000),
    expired=st.booleans(),
    maximum=st.integers(min_value=1, max_value=10_000),
)
def test_the_next_chunk_follows_demand_within_one_and_the_maximum(
    previous: int, used: int, expired: bool, maximum: int
) -> None:
    """Chunks sized to demand keep a slow worker from holding permits the others need."""
    used = min(used, previous)
    left_over = previous - used
    size = next_chunk(previous=previous, left_over=left_over, expired=expired, maximum=maximum)
    assert 1 <= size <= maximum
    if expired and left_over:
        assert size == max(1, min(maximum, used))
    else:
        assert size == min(maximum, previous * 2)


@given(rate=st.floats(min_value=0, max_value=1e7))
def test_defaults_are_one_second_of_burst_and_a_twentieth_of_it_per_chunk(rate: float) -> None:
    """Defaults must be valid for any configured rate, so a setting alone is enough."""
    limit = SendRate.of(rate)
    assert limit.burst == max(1, math.ceil(rate))
    assert 1 <= limit.chunk <= limit.burst
    assert limit.chunk == min(limit.burst, max(1, math.ceil(rate / 20)))
    assert limit.lease_seconds >= limit.chunk * limit.interval


def test_an_unlimited_rate_grants_everything_at_once() -> None:
    """Rate 0 means no limit: nothing is owed, however much is taken."""
    unlimited = SendRate.of(0)
    assert unlimited.unlimited
    assert unlimited.arrival_after(5.0, 5.0, 10**9) == 5.0
    assert unlimited.wait_seconds(arrival=5.0, cooldown_until=0.0, now=5.0, permits=10**9) == 0


@pytest.mark.parametrize(
    ("per_second", "burst", "chunk"),
    [(-1, None, None), (math.inf, None, None), (math.nan, None, None), (10, 0, None), (10, 5, 6)],
)
def test_impossible_limits_are_refused(
    per_second: float, burst: int | None, chunk: int | None
) -> None:
    """A limiter built from a bad value would either never send or never limit."""
    with pytest.raises(ValueError, match="must"):
        SendRate.of(per_second, burst=burst, chunk=chunk)
