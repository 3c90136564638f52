"""The send-rate limiter of one provider, shared by every worker through the database (PRV-5).

A worker reserves permits in chunks (one statement per chunk, on the provider's row) and hands
them out locally; a 429 starts a cool-down that every worker honours. What is guaranteed:

- Over any interval of w seconds (database clock), all workers together hand out at most
  `rate * w + burst + (chunk - 1) * workers` permits: GCRA bounds what is reserved in the
  interval (domain.send_rate), and each worker may start it holding part of one chunk. A single
  `acquire(n)` larger than the burst waits for an idle provider and counts as a burst of n.
- Permits are handed out at most `lease_seconds` after they were reserved, and never after a
  cool-down this worker started; one another worker started is seen at the next chunk.
- A restart does not burst: the arrival time lives in the row, and an instance starts empty.
- No database transaction is open while it sleeps (PRI-3).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable

import structlog

from tidings.domain.send_rate import SendRate, next_chunk
from tidings.storage.database import Database
from tidings.storage.sending import send_rate as rows

log = structlog.get_logger("tidings.send_rate")

Sleep = Callable[[float], Awaitable[object]]
_PROVIDER_NAME_LENGTH = 64  # send_rates.provider


class SendRateLimiter:
    """Permits to send through one provider, at most `rate_per_second` across every worker."""

    def __init__(
        self,
        db: Database,
        provider: str,
        *,
        rate_per_second: float,
        burst: int | None = None,
        chunk: int | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 1 <= len(provider) <= _PROVIDER_NAME_LENGTH:
            raise ValueError(f"a provider name is 1 to {_PROVIDER_NAME_LENGTH} characters")
        self._db = db
        self._provider = provider
        self._rate = SendRate.of(rate_per_second, burst=burst, chunk=chunk)
        self._sleep = sleep
        self._clock = clock  # local and monotonic: only ever used for durations
        self._lock = asyncio.Lock()
        # Permits in hand: how many, until when, and from which reservation.
        self._held = 0
        self._held_until = -math.inf
        self._reserved = 0
        self._reserved_arrival: float | None = None
        self._want = 1
        # Cool-downs: this worker's view of the shared one, and how many it has started.
        self._paused_until = -math.inf
        self._cool_downs = 0
        self._next_shared_check = -math.inf

    async def acquire(self, permits: int = 1) -> None:
        """Wait until `permits` messages may be sent. Returns at once when the rate is 0
        (unlimited), apart from waiting out a cool-down."""
        if permits < 1:
            raise ValueError("acquire at least one permit")
        async with self._lock:
            while True:
                pause = self._paused_until - self._clock()
                if pause > 0:
                    await self._sleep(pause)
                elif self._rate.unlimited:
                    if self._clock() < self._next_shared_check:
                        return
                    await self._check_shared_cool_down()
                elif self._take_held(permits) or await self._reserve(permits):
                    return

    async def cool_down(self, seconds: float) -> None:
        """Stop every worker sending through this provider for `seconds` (a Retry-After),
        starting now; this worker drops the permits it holds at once."""
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError("a cool-down is a finite number of seconds >= 0")
        self._cool_downs += 1
        self._drop_held()
        self._paused_until = max(self._paused_until, self._clock() + seconds)
        async with self._db.write() as conn:
            left = await rows.cool_down(
                conn, self._provider, seconds=seconds, resume_offset=self._rate.resume_offset
            )
        # A longer cool-down another worker started is kept, and now known here too.
        self._paused_until = max(self._paused_until, self._clock() + left)
        log.warning("send_rate.cool_down_started", provider=self._provider, seconds=round(left, 3))

    async def close(self) -> None:
        """Give back the permits in hand, when nobody has reserved since they were taken."""
        async with self._lock:
            if self._held and self._reserved_arrival is not None:
                async with self._db.write() as conn:
                    await rows.give_back(
                        conn,
                        self._provider,
                        reserved_arrival=self._reserved_arrival,
                        cost=self._rate.cost(self._held),
                    )
            self._drop_held()

    def _take_held(self, permits: int) -> bool:
        now = self._clock()
        if self._held >= permits and now < self._held_until:
            self._held -= permits
            return True
        if self._reserved:  # retire the last reservation; its fate sizes the next one
            self._want = next_chunk(
                previous=self._reserved,
                left_over=self._held,
                expired=now >= self._held_until,
                maximum=self._rate.chunk,
            )
        self._drop_held()
        return False

    async def _reserve(self, permits: int) -> bool:
        """One statement for a chunk; on refusal, sleep until it should be granted."""
        want = max(permits, self._want)
        cool_downs = self._cool_downs
        started = self._clock()
        async with self._db.write() as conn:
            arrival = await rows.reserve(
                conn, self._provider, cost=self._rate.cost(want), lead=self._rate.lead(want)
            )
        if arrival is None:
            async with self._db.read() as conn:
                row = await rows.read(conn, self._provider)
            if row is not None:
                await self._sleep(
                    self._rate.wait_seconds(
                        arrival=row.theoretical_arrival,
                        cooldown_until=row.cooldown_until,
                        now=row.now,
                        permits=want,
                    )
                )
            return False
        if cool_downs != self._cool_downs:
            return False  # reserved before this worker's own cool-down began: not to be used
        self._held = want - permits
        self._held_until = started + self._rate.lease_seconds
        self._reserved = want
        self._reserved_arrival = arrival
        return True

    async def _check_shared_cool_down(self) -> None:
        """Unlimited rate: look at the shared cool-down once a lease, never per message."""
        async with self._db.read() as conn:
            row = await rows.read(conn, self._provider)
        now = self._clock()
        self._next_shared_check = now + self._rate.lease_seconds
        if row is not None:
            self._paused_until = max(self._paused_until, now + row.cooldown_until - row.now)

    def _drop_held(self) -> None:
        self._held = 0
        self._held_until = -math.inf
        self._reserved = 0
        self._reserved_arrival = None
