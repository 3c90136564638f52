"""Per-recipient-domain rates (SND-25) on real databases: two workers (two engines) share one
domain's rate through its row, a 421/451 naming the domain halves it for every worker and it
recovers after the cool-down, and unlimited domains never touch the table.

No test asserts how fast anything ran: counts are bounded above by the configured rate over the
measured run (a slow machine only grants fewer), and the slow-down is read back from the row on
the database's own clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import func, select

from tests.support.waiting import wait_for
from tidings.domain.domain_rate import Slowdown, rate_now
from tidings.outbound.domain_rates import DomainRates
from tidings.storage.database import Database, create_database
from tidings.storage.dialect import database_now
from tidings.storage.tables import domain_send_rates

PER_MINUTE = 600.0  # 10 a second, a burst of 10


@pytest.fixture
async def other_db(database_url: str, db: Database) -> AsyncIterator[Database]:
    """A second engine on the same database: a worker on another machine shares nothing else."""
    other = create_database(database_url)
    try:
        yield other
    finally:
        await other.dispose()


async def _slowdown(db: Database, domain: str) -> tuple[Slowdown, float]:
    async with db.read() as conn:
        row = (
            await conn.execute(
                select(
                    domain_send_rates.c.halvings,
                    domain_send_rates.c.slowed_at,
                    database_now(conn),
                ).where(domain_send_rates.c.domain == domain)
            )
        ).one()
    return Slowdown(int(row[0]), float(row[1])), float(row[2])


async def _keep_sending(rates: DomainRates, until: float, handed: list[float]) -> None:
    """A worker's loop: hand over whoever is admitted, wait as long as it is told."""
    while time.monotonic() < until:
        admitted = await rates.admit(["a@gmail.com", "b@gmail.com", "c@gmail.com"])
        handed.extend(time.monotonic() for _ in admitted.now)
        if admitted.held:
            await asyncio.sleep(admitted.wait_seconds)


async def test_two_workers_together_stay_within_the_domain_rate(
    db: Database, other_db: Database
) -> None:
    """Gmail's limit is on the sender, not per worker: the hand-overs of both workers together,
    counted inside any window, stay within rate × window + burst."""
    limits = {"gmail.com": PER_MINUTE}
    first = DomainRates(db, limits, cool_down_seconds=300)
    second = DomainRates(other_db, limits, cool_down_seconds=300)
    one: list[float] = []
    two: list[float] = []
    started = time.monotonic()
    await asyncio.gather(
        _keep_sending(first, started + 2.0, one), _keep_sending(second, started + 2.0, two)
    )
    assert one, "the first worker sent nothing"  # the row is shared, not won by one
    assert two, "the second worker sent nothing"
    handed = sorted(one + two)
    per_second, burst = PER_MINUTE / 60, 10
    for window in (0.5, 1.0, 2.0):
        for start in handed:
            inside = sum(1 for at in handed if start <= at < start + window)
            # Times are taken after each commit: one extra hand-over covers that jitter.
            assert inside <= per_second * window + burst + 1, (window, inside)


async def test_a_deferral_halves_the_domain_for_every_worker_then_it_recovers(
    db: Database, other_db: Database
) -> None:
    """A 421 from Gmail's MX means "slower" to the sender as a whole: the other worker's next
    permits come at half the rate, until a quiet cool-down brings the full rate back."""
    cool_down = 2.0  # long enough that a loaded machine reads the halving before it recovers
    limits = {"gmail.com": PER_MINUTE}
    hit = DomainRates(db, limits, cool_down_seconds=cool_down)
    other = DomainRates(other_db, limits, cool_down_seconds=cool_down)
    assert not await hit.deferred("reader@gmail.com", 550)  # a refusal is no slow-down
    assert not await hit.deferred("reader@example.net", 421)  # not a limited domain
    assert await hit.deferred("reader@Gmail.com", 421)
    slowdown, now = await _slowdown(other_db, "gmail.com")
    assert slowdown.halvings == 1
    assert rate_now(PER_MINUTE, slowdown, now=now, cool_down=cool_down).per_second == 5
    assert await other.deferred("someone@gmail.com", 451)  # again: halved once more
    slowdown, now = await _slowdown(db, "gmail.com")
    assert slowdown.level(now, cool_down) == 2

    async def recovered() -> bool:
        found, at = await _slowdown(other_db, "gmail.com")
        return rate_now(PER_MINUTE, found, now=at, cool_down=cool_down).per_second == 10

    await wait_for(recovered, within_seconds=30)


async def test_unlimited_domains_go_at_once_without_touching_the_database(db: Database) -> None:
    """Most readers' domains have no limit: they must cost nothing, and never wait."""
    rates = DomainRates(db, {"gmail.com": 6}, cool_down_seconds=300)
    admitted = await rates.admit(["a@example.org", "b@gmail.com", "c@gmail.com", "d@example.net"])
    assert admitted.now == ("a@example.org", "b@gmail.com", "d@example.net")
    assert admitted.held == ("c@gmail.com",)
    assert 0 < admitted.wait_seconds <= 10
    async with db.read() as conn:
        domains = (await conn.execute(select(func.count()).select_from(domain_send_rates))).scalar()
    assert domains == 1
