"""Engagement counters and links as the applier and the renderer leave them (ENG-5), written
straight to the tables so that results can be read without sending or hitting anything."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.campaign_links import StoredLink, store_links
from tidings.storage.tables import engagement_counters

HOUR = datetime(2026, 3, 2, 9, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Counted:
    """One counter row: link `number` (0: the segment as a whole) of `segment`, in `hour`."""

    segment: str
    number: int
    kind: str
    human_unique: int
    human_total: int
    machine_total: int
    hour: datetime = HOUR


async def add_counters(conn: AsyncConnection, campaign_id: int, *rows: Counted) -> None:
    await conn.execute(
        insert(engagement_counters),
        [
            {
                "campaign_id": campaign_id,
                "segment": row.segment,
                "number": row.number,
                "kind": row.kind,
                "hour": row.hour,
                "human_unique": row.human_unique,
                "human_total": row.human_total,
                "machine_total": row.machine_total,
            }
            for row in rows
        ],
    )


async def add_links(
    conn: AsyncConnection, campaign_id: int, segment: str, *links: StoredLink
) -> None:
    """The segment's pixel (number 0) and `links`, as the renderer stores them."""
    await store_links(conn, campaign_id, segment, [StoredLink(0, ""), *links], HOUR)
