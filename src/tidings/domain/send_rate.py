"""Send-rate arithmetic (PRV-5): GCRA over one theoretical arrival time per provider. Pure.

GCRA (the generic cell rate algorithm) keeps one number per provider, its *theoretical arrival
time* (TAT). Taking n permits at time `now` moves it to `max(TAT, now) + n / rate`, and is
allowed while the result stays within `burst / rate` seconds of `now` (equivalently: while the
TAT is at most `(burst - n) / rate` ahead of `now`). A provider that has been idle therefore
has `burst` permits ready, and a busy one gets `rate` permits per second.

Guarantee: the permits *reserved* at times within any interval of w seconds number at most
`rate * (w + SAME_INSTANT) + max(burst, n)`, n being the largest single reservation among them;
one larger than the burst is allowed only when the provider is idle, and is paid for after.
Times are floats in seconds on one clock (the database's, in tidings); this module never reads
a clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# A worker reserves about a twentieth of a second's sending at once (the default chunk).
CHUNKS_PER_SECOND = 20
# Permits held locally are handed out for at most this long after they were reserved.
LEASE_SECONDS = 1.0
# Times this close are one instant: sums of 1/rate are not exact in binary floating point, and
# the last permit of a burst must not hang on a rounding error. Costs at most rate * 1e-6 permits.
SAME_INSTANT = 1e-6
# A cool-down (and the stored row) uses this for "never": the Unix epoch.
NEVER = 0.0


@dataclass(frozen=True)
class SendRate:
    """A provider's configured rate, burst and chunk; `per_second == 0` means unlimited."""

    per_second: float
    burst: int
    chunk: int

    @classmethod
    def of(
        cls, per_second: float, *, burst: int | None = None, chunk: int | None = None
    ) -> SendRate:
        """Validate and fill the defaults: a burst of one second's sending and a chunk of
        `1 / CHUNKS_PER_SECOND` of it (at least 1 each; the chunk never above the burst)."""
        if not math.isfinite(per_second) or per_second < 0:
            raise ValueError("the send rate must be a finite number of messages per second >= 0")
        if burst is None:
            burst = max(1, math.ceil(per_second))
        if chunk is None:
            chunk = min(burst, max(1, math.ceil(per_second / CHUNKS_PER_SECOND)))
        if burst < 1:
            raise ValueError("the burst must be at least 1 permit")
        if not 1 <= chunk <= burst:
            raise ValueError("the chunk must be at least 1 permit and at most the burst")
        return cls(per_second=per_second, burst=burst, chunk=chunk)

    @property
    def unlimited(self) -> bool:
        return self.per_second == 0

    @property
    def interval(self) -> float:
        """Seconds one permit is worth (0 when unlimited)."""
        return 0.0 if self.unlimited else 1.0 / self.per_second

    @property
    def lease_seconds(self) -> float:
        """How long reserved permits stay usable locally: long enough to spend a whole chunk
        at the full rate, and at least `LEASE_SECONDS`."""
        return max(LEASE_SECONDS, self.chunk * self.interval)

    def cost(self, permits: int) -> float:
        """How far taking `permits` moves the theoretical arrival time."""
        return permits * self.interval

    def lead(self, permits: int) -> float:
        """How far ahead of now the theoretical arrival time may be for `permits` to be taken:
        what is left of the burst after them. A reservation larger than the burst has no lead:
        only an idle provider grants it, and it is paid for afterwards."""
        return (max(self.burst, permits) - permits) * self.interval + SAME_INSTANT

    def arrival_after(self, arrival: float, now: float, permits: int) -> float | None:
        """The theoretical arrival time after taking `permits` at `now`, or None if refused.
        (The database applies the same step in one statement: storage.send_rate.reserve.)"""
        if arrival > now + self.lead(permits):
            return None
        return max(arrival, now) + self.cost(permits)

    def wait_seconds(
        self, *, arrival: float, cooldown_until: float, now: float, permits: int
    ) -> float:
        """Seconds from `now` until `permits` may be taken, if nobody else takes any first."""
        return max(0.0, cooldown_until - now, arrival - self.lead(permits) - now)

    @property
    def resume_offset(self) -> float:
        """How far past the end of a cool-down the theoretical arrival time is pushed: sending
        resumes at the configured rate, without a burst into a provider that just said 429."""
        return self.burst * self.interval


def next_chunk(*, previous: int, left_over: int, expired: bool, maximum: int) -> int:
    """How many permits a worker reserves next, from how its last reservation went.

    A reservation whose lease ended with permits left over shows the worker's own demand: ask
    for what was used. One that ran out asks for twice as many, up to `maximum`. A slow worker
    thus holds few permits it cannot spend, and a fast one few statements per permit.
    """
    if expired and left_over > 0:
        return max(1, min(maximum, previous - left_over))
    return max(1, min(maximum, previous * 2))
