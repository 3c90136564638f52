"""Per-recipient-domain rate arithmetic (SND-25) alone: all takers together never exceed a
domain's rate, a deferral halves it for a cool-down and it recovers, and nobody refused is
told to wait forever."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.domain_rate import (
    MAX_HALVINGS,
    Slowdown,
    rate_now,
    recipient_domain,
    take,
)
from tidings.domain.send_rate import SAME_INSTANT

COOL_DOWN = 300.0


def test_a_deferral_halves_the_rate_for_one_cool_down_then_it_recovers() -> None:
    """A mailbox provider's 421 means "slower": half the pace until it has had a rest, then
    the configured pace again — not slow for ever, not straight back to full speed."""
    fresh = Slowdown()
    assert rate_now(600, fresh, now=1000, cool_down=COOL_DOWN).per_second == 10
    slowed = fresh.deferred(1000, COOL_DOWN)
    assert rate_now(600, slowed, now=1000, cool_down=COOL_DOWN).per_second == 5
    assert rate_now(600, slowed, now=1299, cool_down=COOL_DOWN).per_second == 5
    assert rate_now(600, slowed, now=1300, cool_down=COOL_DOWN).per_second == 10


def test_deferrals_in_a_row_halve_again_down_to_a_floor_and_recover_step_by_step() -> None:
    """A provider that keeps deferring keeps the domain slow; once it stops, each quiet
    cool-down doubles the pace back."""
    slowdown = Slowdown()
    for n in range(10):
        slowdown = slowdown.deferred(1000 + n, COOL_DOWN)
    assert slowdown.halvings == MAX_HALVINGS
    last = 1009
    rates = [
        rate_now(960, slowdown, now=last + k * COOL_DOWN, cool_down=COOL_DOWN).per_second
        for k in range(6)
    ]
    assert rates == [1, 2, 4, 8, 16, 16]


def test_the_domain_of_an_address_is_matched_as_configured() -> None:
    """`Gmail.COM` readers must fall under the `gmail.com` limit."""
    assert recipient_domain("Reader@Gmail.COM") == "gmail.com"
    assert recipient_domain("a@example.net.") == "example.net"


def test_a_busy_domain_grants_nothing_and_names_the_wait() -> None:
    """A refused recipient waits for a known time, then goes: never lost, never spinning."""
    rate = rate_now(60, Slowdown(), now=0, cool_down=COOL_DOWN)  # 1 a second, burst 1
    first = take(rate, arrival=0, now=100, wanted=5)
    assert (first.permits, first.arrival) == (1, 101)
    assert first.wait_seconds == pytest.approx(1, abs=1e-5)
    again = take(rate, arrival=first.arrival, now=100.5, wanted=1)
    assert again.permits == 0
    assert again.wait_seconds == pytest.approx(0.5, abs=1e-5)


@given(
    per_minute=st.sampled_from([6.0, 60.0, 300.0, 600.0, 1200.0]),
    requests=st.lists(st.tuples(st.floats(0, 0.5), st.integers(1, 30)), min_size=1, max_size=200),
    window=st.floats(0.5, 20),
)
def test_everyone_together_never_exceeds_the_domain_rate(
    per_minute: float, requests: list[tuple[float, int]], window: float
) -> None:
    """However many workers ask, and however often, the permits granted inside any window of
    w seconds number at most rate × w + burst: the mailbox provider sees the agreed pace."""
    rate = rate_now(per_minute, Slowdown(), now=0, cool_down=COOL_DOWN)
    arrival, now = 0.0, 1000.0
    grants: list[tuple[float, int]] = []
    for gap, wanted in requests:
        now += gap
        taken = take(rate, arrival=arrival, now=now, wanted=wanted)
        assert 0 <= taken.permits <= wanted
        assert (taken.wait_seconds > 0) == (taken.permits < wanted)
        arrival = taken.arrival
        if taken.permits:
            grants.append((now, taken.permits))
    for start, _ in grants:
        inside = sum(n for at, n in grants if start <= at < start + window)
        assert inside <= rate.per_second * (window + SAME_INSTANT) + rate.burst
