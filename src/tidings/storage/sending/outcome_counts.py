"""Named queries for a large campaign's stored outcome counts (SND-27): what the workers
counted from its recipient rows and events, and when, so its page reads one row instead of
scanning a million."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.dialect import insert_for
from tidings.storage.tables import campaign_outcome_counts, campaign_sends


@dataclass(frozen=True, slots=True)
class StoredCounts:
    """A campaign's counts as last counted: per segment, and events per hour."""

    segments: dict[str, dict[str, int]]
    hourly: list[tuple[datetime, str, int]]
    counted_at: datetime
    took_ms: int


@dataclass(frozen=True, slots=True)
class Recount:
    """A large campaign the workers may count again, with when they last did."""

    campaign_id: int
    counted_at: datetime | None
    took_ms: int
    finished_at: datetime | None


async def sizes(conn: AsyncConnection, campaign_ids: Sequence[int]) -> dict[int, int]:
    """The prepared audience size of each campaign that has one (its candidates)."""
    if not campaign_ids:
        return {}
    send = campaign_sends.c
    query = select(send.campaign_id, send.candidate_count).where(
        send.campaign_id.in_(list(campaign_ids)), send.candidate_count.is_not(None)
    )
    return {int(r.campaign_id): int(r.candidate_count) for r in await conn.execute(query)}


async def stored(conn: AsyncConnection, campaign_ids: Sequence[int]) -> dict[int, StoredCounts]:
    if not campaign_ids:
        return {}
    row = campaign_outcome_counts.c
    query = select(campaign_outcome_counts).where(row.campaign_id.in_(list(campaign_ids)))
    return {
        int(r.campaign_id): StoredCounts(
            segments={str(name): dict(counts) for name, counts in r.segments.items()},
            hourly=[(datetime.fromisoformat(at), str(kind), int(n)) for at, kind, n in r.hourly],
            counted_at=r.counted_at,
            took_ms=int(r.took_ms),
        )
        for r in await conn.execute(query)
    }


async def store(conn: AsyncConnection, campaign_id: int, counts: StoredCounts) -> None:
    """Keep a campaign's counts, replacing older ones (a count never goes back in time: of two
    workers' counts the later one stays)."""
    values: dict[str, Any] = {
        "segments": counts.segments,
        "hourly": [[at.isoformat(), kind, n] for at, kind, n in counts.hourly],
        "counted_at": counts.counted_at,
        "took_ms": counts.took_ms,
    }
    insert = insert_for(conn, campaign_outcome_counts)
    statement = insert.values(campaign_id=campaign_id, **values).on_conflict_do_update(
        index_elements=[campaign_outcome_counts.c.campaign_id],
        set_=values,
        where=campaign_outcome_counts.c.counted_at <= insert.excluded.counted_at,
    )
    await conn.execute(statement)


async def recounts(conn: AsyncConnection, *, above: int, counted_before: datetime) -> list[Recount]:
    """Prepared campaigns of more than `above` candidates never counted, or last counted
    before `counted_before`, the longest uncounted first."""
    send, counts = campaign_sends.c, campaign_outcome_counts.c
    query = (
        select(send.campaign_id, counts.counted_at, counts.took_ms, send.finished_at)
        .select_from(
            campaign_sends.outerjoin(
                campaign_outcome_counts, counts.campaign_id == send.campaign_id
            )
        )
        .where(
            send.candidate_count > above,
            counts.counted_at.is_(None) | (counts.counted_at < counted_before),
        )
        .order_by(counts.counted_at.asc().nulls_first(), send.campaign_id)
    )
    return [
        Recount(int(r.campaign_id), r.counted_at, int(r.took_ms or 0), r.finished_at)
        for r in await conn.execute(query)
    ]
