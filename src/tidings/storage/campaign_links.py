"""Named queries for a campaign's tracked links (ENG-2): stored once per segment before its
first message goes out, read by the click and open endpoints to find where a token leads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.dialect import insert_for
from tidings.storage.tables import campaign_links


@dataclass(frozen=True, slots=True)
class StoredLink:
    """One link of a segment as rendered: number 0 is the open pixel (url '')."""

    number: int
    url: str
    hidden: bool = False


async def store_links(
    conn: AsyncConnection,
    campaign_id: int,
    segment: str,
    links: Sequence[StoredLink],
    now: datetime,
) -> None:
    """Record the segment's links; a link already stored (another worker rendered the same
    segment, a batch retried) is left as it is, so storing is idempotent."""
    if not links:
        return
    statement = insert_for(conn, campaign_links).values(
        [
            {
                "campaign_id": campaign_id,
                "segment": segment,
                "number": link.number,
                "url": link.url,
                "hidden": link.hidden,
                "created_at": now,
            }
            for link in links
        ]
    )
    await conn.execute(
        statement.on_conflict_do_nothing(index_elements=["campaign_id", "segment", "number"])
    )


async def find_link(
    conn: AsyncConnection, campaign_id: int, segment: str, number: int
) -> StoredLink | None:
    """The stored link a token names, or None (never stored, or its campaign deleted)."""
    row = (
        await conn.execute(
            select(campaign_links.c.number, campaign_links.c.url, campaign_links.c.hidden).where(
                campaign_links.c.campaign_id == campaign_id,
                campaign_links.c.segment == segment,
                campaign_links.c.number == number,
            )
        )
    ).first()
    return None if row is None else StoredLink(row.number, row.url, row.hidden)


async def links_of(conn: AsyncConnection, campaign_id: int) -> list[tuple[str, StoredLink]]:
    """Every stored link of a campaign as (segment, link), in segment and number order."""
    rows = await conn.execute(
        select(
            campaign_links.c.segment,
            campaign_links.c.number,
            campaign_links.c.url,
            campaign_links.c.hidden,
        )
        .where(campaign_links.c.campaign_id == campaign_id)
        .order_by(campaign_links.c.segment, campaign_links.c.number)
    )
    return [(row.segment, StoredLink(row.number, row.url, row.hidden)) for row in rows]
