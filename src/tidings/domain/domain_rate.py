"""Per-recipient-domain rates (SPEC SND-25): how fast a domain may be sent to now, and how a
deferral naming it slows it down. Pure: times are floats in seconds on one clock (the
database's), passed in.

A domain's configured rate (messages per minute) is the GCRA rate of `domain.send_rate`, one
theoretical arrival time per domain shared by every worker. A 421/451 naming the domain halves
it: the row keeps how many halvings are in force (`halvings`, at most `MAX_HALVINGS`) and when
the last deferral came (`slowed_at`). Each `cool_down` seconds without another deferral takes
one halving back, so a domain that said "slow down" once is at half rate for one cool-down,
and one that keeps saying it stays down until it stops — then recovers step by step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tidings.domain.send_rate import SAME_INSTANT, SendRate

MAX_HALVINGS = 4  # a domain is never slowed below 1/16 of its configured rate
DEFERRAL_STATUSES = frozenset({421, 451})


@dataclass(frozen=True, slots=True)
class Slowdown:
    """A domain's slow-down as stored: halvings in force at `slowed_at` (0: none)."""

    halvings: int = 0
    slowed_at: float = 0.0

    def level(self, now: float, cool_down: float) -> int:
        """The halvings in force at `now`: one fewer per whole cool-down since `slowed_at`."""
        if self.halvings <= 0:
            return 0
        elapsed = max(0.0, now - self.slowed_at)
        return max(0, self.halvings - math.floor(elapsed / cool_down))

    def deferred(self, now: float, cool_down: float) -> Slowdown:
        """The slow-down after a 421/451 at `now`: one halving more than is in force, at most
        `MAX_HALVINGS`, counted from now."""
        return Slowdown(min(MAX_HALVINGS, self.level(now, cool_down) + 1), now)


def rate_now(per_minute: float, slowdown: Slowdown, *, now: float, cool_down: float) -> SendRate:
    """The GCRA rate of a domain configured at `per_minute`, given its slow-down at `now`."""
    if not math.isfinite(per_minute) or per_minute <= 0:
        raise ValueError("a domain rate is a positive number of messages per minute")
    if cool_down <= 0:
        raise ValueError("the cool-down is a positive number of seconds")
    per_second = per_minute / 60 / 2 ** slowdown.level(now, cool_down)
    # A burst of one second's sending (at least one message): a domain limit is about pace.
    return SendRate.of(per_second, burst=max(1, math.floor(per_second)), chunk=1)


def recipient_domain(address: str) -> str:
    """The domain an address is delivered to, as configured keys are written (lower case,
    no trailing dot)."""
    return address.rpartition("@")[2].strip().lower().rstrip(".")


@dataclass(frozen=True, slots=True)
class Taken:
    """What one request for permits got: how many (0 to `wanted`), the domain's arrival time
    after it, and — when some were not granted — seconds until the next one is due."""

    permits: int
    arrival: float
    wait_seconds: float


def take(rate: SendRate, *, arrival: float, now: float, wanted: int) -> Taken:
    """As many of `wanted` permits as fit in the burst left at `now` (GCRA), the rest refused:
    whoever is refused waits without holding up recipients of other domains."""
    if wanted < 1:
        raise ValueError("take at least one permit")
    start = max(arrival, now)
    room = math.floor((now + rate.burst * rate.interval - start + SAME_INSTANT) / rate.interval)
    permits = max(0, min(wanted, room))
    after = start + permits * rate.interval if permits else arrival
    wait = 0.0
    if permits < wanted:
        wait = rate.wait_seconds(arrival=after, cooldown_until=0.0, now=now, permits=1)
    return Taken(permits, after, wait)
