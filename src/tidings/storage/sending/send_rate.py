"""Named statements on the shared send-rate row of a provider (PRV-5): reserve, read, cool down,
give back. Each is one statement; every time in them is the database's (storage.dialect).

The arithmetic is domain.send_rate's GCRA step written in SQL; the limiter passes the amounts
(`cost`, `lead`) that the domain computes, so the statements only compare and add.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, case, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.send_rate import NEVER
from tidings.storage.dialect import database_now, insert_for
from tidings.storage.tables import send_rates


@dataclass(frozen=True)
class SendRateRow:
    """A provider's row as of `now`, all three on the database's clock."""

    theoretical_arrival: float
    cooldown_until: float
    now: float


def _later(first: ColumnElement[float], second: ColumnElement[float]) -> ColumnElement[float]:
    # max() of two values; SQLite and PostgreSQL spell the function differently, CASE alike.
    return case((first > second, first), else_=second)


async def reserve(
    conn: AsyncConnection, provider: str, *, cost: float, lead: float
) -> float | None:
    """Take permits worth `cost` seconds if the theoretical arrival time is at most `lead`
    ahead of now and no cool-down is running; returns the new arrival time, or None if refused.
    Creates the provider's row (idle) on first use."""
    now = database_now(conn)
    arrival = send_rates.c.theoretical_arrival
    statement = insert_for(conn, send_rates).values(
        provider=provider, theoretical_arrival=now + cost, cooldown_until=NEVER
    )
    statement = statement.on_conflict_do_update(
        index_elements=[send_rates.c.provider],
        set_={"theoretical_arrival": _later(arrival, now) + cost},
        where=(arrival <= now + lead) & (send_rates.c.cooldown_until <= now),
    ).returning(arrival)
    result = await conn.execute(statement)
    moved = result.scalar_one_or_none()
    return None if moved is None else float(moved)


async def read(conn: AsyncConnection, provider: str) -> SendRateRow | None:
    """The provider's row and the database's time, or None if it has never been used."""
    row = (
        await conn.execute(
            select(
                send_rates.c.theoretical_arrival,
                send_rates.c.cooldown_until,
                database_now(conn).label("now"),
            ).where(send_rates.c.provider == provider)
        )
    ).one_or_none()
    if row is None:
        return None
    return SendRateRow(float(row[0]), float(row[1]), float(row[2]))


async def cool_down(
    conn: AsyncConnection, provider: str, *, seconds: float, resume_offset: float
) -> float:
    """Refuse every reservation for `seconds` from now (a longer cool-down already running is
    kept) and push the arrival time `resume_offset` past its end. Returns the seconds left."""
    now = database_now(conn)
    until = now + seconds
    statement = insert_for(conn, send_rates).values(
        provider=provider, theoretical_arrival=until + resume_offset, cooldown_until=until
    )
    statement = statement.on_conflict_do_update(
        index_elements=[send_rates.c.provider],
        set_={
            "cooldown_until": _later(
                send_rates.c.cooldown_until, statement.excluded.cooldown_until
            ),
            "theoretical_arrival": _later(
                send_rates.c.theoretical_arrival, statement.excluded.theoretical_arrival
            ),
        },
    ).returning(send_rates.c.cooldown_until - now)
    return float((await conn.execute(statement)).scalar_one())


async def give_back(
    conn: AsyncConnection, provider: str, *, reserved_arrival: float, cost: float
) -> bool:
    """Undo the unspent tail of a reservation, worth `cost` seconds, only if nobody has moved
    the arrival time since it returned `reserved_arrival` (otherwise it would create permits
    that were never there). Returns whether it was given back."""
    result = await conn.execute(
        update(send_rates)
        .where(
            send_rates.c.provider == provider,
            send_rates.c.theoretical_arrival == reserved_arrival,
        )
        .values(theoretical_arrival=send_rates.c.theoretical_arrival - cost)
    )
    return bool(result.rowcount)
