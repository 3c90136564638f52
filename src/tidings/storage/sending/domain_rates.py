"""Named statements on the shared rate row of a recipient domain (SND-25): take permits and
slow the domain down. Each runs inside the caller's write transaction with the domain's row
locked (PostgreSQL `FOR UPDATE`; SQLite's one writer), on the database's clock, so every
worker on every machine reads and moves the same arrival time; the arithmetic is
domain.domain_rate's.
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.domain_rate import Slowdown, Taken, rate_now, take
from tidings.storage.dialect import database_now, insert_for
from tidings.storage.tables import domain_send_rates

_rates = domain_send_rates.c


async def _locked(conn: AsyncConnection, domain: str) -> tuple[float, Slowdown, float]:
    """The domain's arrival time and slow-down, and the database's time, its row locked (and
    created idle on first use)."""
    await conn.execute(
        insert_for(conn, domain_send_rates)
        .values(domain=domain, theoretical_arrival=0.0, halvings=0, slowed_at=0.0)
        .on_conflict_do_nothing(index_elements=[_rates.domain])
    )
    row = (
        await conn.execute(
            select(
                _rates.theoretical_arrival,
                _rates.halvings,
                _rates.slowed_at,
                database_now(conn).label("now"),
            )
            .where(_rates.domain == domain)
            .with_for_update()
        )
    ).one()
    return float(row[0]), Slowdown(int(row[1]), float(row[2])), float(row[3])


async def take_permits(
    conn: AsyncConnection, domain: str, *, per_minute: float, cool_down: float, wanted: int
) -> Taken:
    """Up to `wanted` permits to send to `domain` now, at its rate as slowed at this moment."""
    arrival, slowdown, now = await _locked(conn, domain)
    rate = rate_now(per_minute, slowdown, now=now, cool_down=cool_down)
    taken = take(rate, arrival=arrival, now=now, wanted=wanted)
    if taken.permits:
        await conn.execute(
            update(domain_send_rates)
            .where(_rates.domain == domain)
            .values(theoretical_arrival=taken.arrival)
        )
    return taken


async def slow_down(conn: AsyncConnection, domain: str, *, cool_down: float) -> Slowdown:
    """A 421/451 named the domain: one halving more, from now. Returns the new slow-down."""
    _arrival, slowdown, now = await _locked(conn, domain)
    slower = slowdown.deferred(now, cool_down)
    await conn.execute(
        update(domain_send_rates)
        .where(_rates.domain == domain)
        .values(halvings=slower.halvings, slowed_at=slower.slowed_at)
    )
    return slower
