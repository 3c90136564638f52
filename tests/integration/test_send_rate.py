"""The shared send-rate limiter (PRV-5) on real databases: workers share one provider row, the
database's clock decides, a 429 cool-down reaches every worker, and rate 0 costs nothing.

No test asserts how fast anything ran: counts are bounded above by the configured rate over a
measured run (a slow machine only grants fewer), waits are read from what a limiter asked to
sleep, and cool-downs are checked against the stored row on the database's own clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from sqlalchemy import event

from tidings.outbound.send_rate import SendRateLimiter
from tidings.storage.database import Database, create_database
from tidings.storage.sending import send_rate as rows

PROVIDER = "smtp"


class _Stopped(Exception):
    pass


class FirstWait:
    """A `sleep` that records the first wait a limiter asks for and stops it there, so a test
    reads the wait without spending it."""

    def __init__(self) -> None:
        self.asked: float | None = None

    async def __call__(self, seconds: float) -> None:
        self.asked = seconds
        raise _Stopped

    async def of(self, limiter: SendRateLimiter, permits: int = 1) -> float:
        """How long `limiter.acquire(permits)` asks to wait; failing if it does not wait."""
        with pytest.raises(_Stopped):
            await limiter.acquire(permits)
        assert self.asked is not None
        return self.asked


@pytest.fixture
async def other_db(database_url: str, db: Database) -> AsyncIterator[Database]:
    """A second engine on the same database: a worker on another machine shares nothing else."""
    other = create_database(database_url)
    try:
        yield other
    finally:
        await other.dispose()


async def _row(db: Database) -> rows.SendRateRow | None:
    async with db.read() as conn:
        return await rows.read(conn, PROVIDER)


async def _keep_acquiring(limiter: SendRateLimiter, until: float, granted: list[int]) -> None:
    while time.monotonic() < until:
        await limiter.acquire()
        granted.append(1)


async def test_two_workers_together_never_exceed_rate_times_elapsed_plus_burst(
    db: Database, other_db: Database
) -> None:
    """The provider's limit is on the account, so every worker's sends count against one rate."""
    rate, burst, chunk = 200.0, 20, 5
    first = SendRateLimiter(db, PROVIDER, rate_per_second=rate, burst=burst, chunk=chunk)
    second = SendRateLimiter(other_db, PROVIDER, rate_per_second=rate, burst=burst, chunk=chunk)
    granted: list[int] = []
    started = time.monotonic()
    await asyncio.gather(
        _keep_acquiring(first, started + 1.0, granted),
        _keep_acquiring(second, started + 1.0, granted),
    )
    elapsed = time.monotonic() - started
    # Each worker may start holding part of a chunk; one more permit covers clock rounding.
    allowed = rate * elapsed + burst + 2 * (chunk - 1) + 1
    assert 0 < len(granted) <= allowed
    stored = await _row(db)
    assert stored is not None
    assert stored.theoretical_arrival <= stored.now + burst / rate


async def test_a_restarted_worker_does_not_get_a_fresh_burst(
    db: Database, other_db: Database
) -> None:
    """A crash loop must not multiply the burst: the spent allowance is in the row, not memory."""
    before = SendRateLimiter(db, PROVIDER, rate_per_second=0.1, burst=3)
    for _ in range(3):
        await before.acquire()
    await before.close()
    sleep = FirstWait()
    after = SendRateLimiter(other_db, PROVIDER, rate_per_second=0.1, burst=3, sleep=sleep)
    # The next permit is 10 s after the burst was spent; a stalled test still sees most of it.
    assert 5 < await sleep.of(after) <= 10


async def test_a_cool_down_from_one_worker_makes_another_wait_on_the_database_clock(
    db: Database, other_db: Database
) -> None:
    """Retry-After applies to the account: every worker must hold off, whatever its own clock."""
    hit_by_429 = SendRateLimiter(db, PROVIDER, rate_per_second=1000, chunk=1)
    await hit_by_429.acquire()
    # This worker's clock runs a hundred times fast: a locally timed pause would end at once.
    fast = SendRateLimiter(
        other_db, PROVIDER, rate_per_second=1000, chunk=1, clock=lambda: time.monotonic() * 100
    )
    await fast.acquire()
    await hit_by_429.cool_down(2)
    await fast.acquire()
    stored = await _row(db)
    assert stored is not None
    assert stored.cooldown_until > 0
    assert stored.now >= stored.cooldown_until


async def test_a_worker_stops_handing_out_held_permits_when_it_cools_down(db: Database) -> None:
    """Permits reserved before a 429 are no licence to keep sending into it."""
    sleep = FirstWait()
    limiter = SendRateLimiter(db, PROVIDER, rate_per_second=1000, chunk=16, sleep=sleep)
    for _ in range(4):  # reservations of 1, then 2, then 4: three permits left in hand
        await limiter.acquire()
    await limiter.cool_down(30)
    assert 20 < await sleep.of(limiter) <= 30


@pytest.mark.parametrize(
    ("rate", "burst"),
    [
        (0, None),  # unlimited: the 429 is the only limit there is
        (1, 100),  # a burst of 100 s of sending would cover the cool-down if the rate alone counted
    ],
)
async def test_a_cool_down_binds_every_worker_whatever_its_rate_setting(
    db: Database, other_db: Database, rate: float, burst: int | None
) -> None:
    """Mid-way through a change of the setting workers disagree on the rate, never on a 429."""
    await SendRateLimiter(db, PROVIDER, rate_per_second=0).cool_down(30)
    sleep = FirstWait()
    other = SendRateLimiter(other_db, PROVIDER, rate_per_second=rate, burst=burst, sleep=sleep)
    assert 20 < await sleep.of(other) <= 30


@pytest.fixture
def statements(db: Database) -> Iterator[list[str]]:
    """Every SQL statement the database handle sends while the test runs."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement.strip().split()[0].upper())

    event.listen(db.engine.sync_engine, "before_cursor_execute", record)
    yield seen
    event.remove(db.engine.sync_engine, "before_cursor_execute", record)


async def test_an_unlimited_rate_writes_nothing_per_acquire(
    db: Database, statements: list[str]
) -> None:
    """Rate 0 is the default: sending must not pay a database round trip per message."""
    frozen = time.monotonic()
    limiter = SendRateLimiter(db, PROVIDER, rate_per_second=0, clock=lambda: frozen)
    for _ in range(1_000):
        await limiter.acquire()
    assert [s for s in statements if s in {"INSERT", "UPDATE", "DELETE"}] == []
    # One look at the shared cool-down (and SQLite's BEGIN), not one per message.
    assert statements.count("SELECT") == 1
    assert len(statements) <= 2
    assert await _row(db) is None


async def test_chunks_take_one_statement_for_many_permits(
    db: Database, statements: list[str]
) -> None:
    """One hot-row write per message would make the limiter the bottleneck it guards against."""
    limiter = SendRateLimiter(db, PROVIDER, rate_per_second=1e6, burst=10_000, chunk=1_000)
    for _ in range(5_000):
        await limiter.acquire()
    # Reservations of 1, 2, 4, ... 512, then 1,000 each: 15 for 5,000 permits.
    assert statements.count("INSERT") <= 20


async def test_a_reservation_larger_than_the_burst_is_granted_once_then_paid_for(
    db: Database,
) -> None:
    """A batch bigger than the burst must still go out, and the account must not overspend."""
    sleep = FirstWait()
    limiter = SendRateLimiter(db, PROVIDER, rate_per_second=1, burst=5, sleep=sleep)
    await limiter.acquire(8)
    # 8 permits at once leave 3 owed beyond the burst: the next waits about 4 s.
    assert 2 < await sleep.of(limiter) <= 4


async def test_close_gives_back_the_permits_in_hand(db: Database) -> None:
    """A worker that stops must not take unspent permits with it."""
    limiter = SendRateLimiter(db, PROVIDER, rate_per_second=1000, chunk=16)
    for _ in range(4):  # three permits left in hand, as above
        await limiter.acquire()
    held = await _row(db)
    await limiter.close()
    given_back = await _row(db)
    assert held is not None
    assert given_back is not None
    returned = held.theoretical_arrival - given_back.theoretical_arrival
    assert returned == pytest.approx(0.003, abs=1e-6)


async def test_giving_back_after_another_reservation_changes_nothing(db: Database) -> None:
    """Undoing a reservation someone has built on would create permits that never existed."""
    async with db.write() as conn:
        mine = await rows.reserve(conn, PROVIDER, cost=0.5, lead=10)
        theirs = await rows.reserve(conn, PROVIDER, cost=0.5, lead=10)
    assert mine is not None
    assert theirs is not None
    async with db.write() as conn:
        assert not await rows.give_back(conn, PROVIDER, reserved_arrival=mine, cost=0.5)
    stored = await _row(db)
    assert stored is not None
    assert stored.theoretical_arrival == theirs


async def test_a_reservation_is_refused_while_the_arrival_time_is_too_far_ahead(
    db: Database,
) -> None:
    """The database applies the GCRA step itself, so two workers cannot both take one permit."""
    async with db.write() as conn:
        assert await rows.reserve(conn, PROVIDER, cost=60, lead=0) is not None
        assert await rows.reserve(conn, PROVIDER, cost=1, lead=30) is None
        assert await rows.reserve(conn, PROVIDER, cost=1, lead=120) is not None


@pytest.mark.parametrize("provider", ["", "x" * 65])
def test_a_provider_name_the_row_cannot_hold_is_refused(db: Database, provider: str) -> None:
    """A name cut short by the column would share, or fail, a row meant for another provider."""
    with pytest.raises(ValueError, match="provider name"):
        SendRateLimiter(db, provider, rate_per_second=10)
