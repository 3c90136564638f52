"""Named read-only queries over a campaign's engagement counters (ENG-5): every statement
starts with `campaign_id`, the first column of the counters' primary key, so each reads the
campaign's counter rows through the index (O(links x hours)), never a hit or a recipient."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.engagement_figures import Figures
from tidings.domain.tracking import PIXEL_NUMBER, HitKind
from tidings.storage.tables import (
    campaign_batches,
    campaign_links,
    campaign_sends,
    campaigns,
    engagement_counters,
    newsletters,
)

counter = engagement_counters.c
FIGURES = ("human_unique", "human_total", "machine_total")
SUMS = tuple(func.coalesce(func.sum(counter[name]), 0).label(name) for name in FIGURES)


@dataclass(frozen=True, slots=True)
class LinkFigures:
    segment: str
    number: int
    url: str
    clicks: Figures


def _figures(row: object) -> Figures:
    mapping = row._mapping  # type: ignore[attr-defined]
    return Figures(
        int(mapping["human_unique"]), int(mapping["human_total"]), int(mapping["machine_total"])
    )


async def tracking_of(conn: AsyncConnection, campaign_id: int) -> str | None:
    """The tracking mode the campaign was sent under (frozen at preparation), else its
    newsletter's current one; None when there is no campaign."""
    query = (
        select(func.coalesce(campaign_sends.c.tracking, newsletters.c.tracking))
        .select_from(
            campaigns.join(newsletters, newsletters.c.id == campaigns.c.newsletter_id).outerjoin(
                campaign_sends, campaign_sends.c.campaign_id == campaigns.c.id
            )
        )
        .where(campaigns.c.id == campaign_id)
    )
    found = (await conn.execute(query)).scalar()
    return None if found is None else str(found)


async def segment_figures(
    conn: AsyncConnection, campaign_id: int
) -> dict[tuple[str, str], Figures]:
    """(segment, kind) -> its segment-wide figures: link number 0 is the pixel for opens and
    any link for clicks, so a person clicking two links counts once in `human_unique`."""
    query = (
        select(counter.segment, counter.kind, *SUMS)
        .where(counter.campaign_id == campaign_id, counter.number == PIXEL_NUMBER)
        .group_by(counter.segment, counter.kind)
        .order_by(counter.segment)
    )
    return {(str(row.segment), str(row.kind)): _figures(row) for row in await conn.execute(query)}


async def link_figures(conn: AsyncConnection, campaign_id: int) -> list[LinkFigures]:
    """Each visible link of each segment with its clicks (0 when never clicked): the pixel and
    hidden links are left out (a hidden link's hits are machines', counted in number 0)."""
    link = campaign_links.c
    # Summed first, then joined: one pass over the campaign's click rows, not one per link.
    clicks = (
        select(counter.segment, counter.number, *SUMS)
        .where(
            counter.campaign_id == campaign_id,
            counter.number > PIXEL_NUMBER,
            counter.kind == HitKind.CLICK.value,
        )
        .group_by(counter.segment, counter.number)
        .subquery()
    )
    query = (
        select(
            link.segment,
            link.number,
            link.url,
            *(func.coalesce(clicks.c[name], 0).label(name) for name in FIGURES),
        )
        .select_from(
            campaign_links.outerjoin(
                clicks, and_(clicks.c.segment == link.segment, clicks.c.number == link.number)
            )
        )
        .where(link.campaign_id == campaign_id, link.number > PIXEL_NUMBER, ~link.hidden)
        .order_by(link.segment, link.number)
    )
    return [
        LinkFigures(str(row.segment), int(row.number), str(row.url), _figures(row))
        for row in await conn.execute(query)
    ]


async def hourly_people(conn: AsyncConnection, campaign_id: int) -> list[tuple[datetime, str, int]]:
    """(hour, kind, people) oldest first: messages first opened or clicked by a person in
    that hour, across segments."""
    query = (
        select(counter.hour, counter.kind, func.sum(counter.human_unique).label("people"))
        .where(counter.campaign_id == campaign_id, counter.number == PIXEL_NUMBER)
        .group_by(counter.hour, counter.kind)
        .order_by(counter.hour)
    )
    return [(row.hour, str(row.kind), int(row.people or 0)) for row in await conn.execute(query)]


async def people_by_campaign(
    conn: AsyncConnection, campaign_ids: list[int]
) -> dict[int, dict[str, int]]:
    """Per campaign, kind -> messages a person opened or clicked (the campaigns list)."""
    if not campaign_ids:
        return {}
    query = (
        select(counter.campaign_id, counter.kind, func.sum(counter.human_unique).label("people"))
        .where(counter.campaign_id.in_(campaign_ids), counter.number == PIXEL_NUMBER)
        .group_by(counter.campaign_id, counter.kind)
    )
    found: dict[int, dict[str, int]] = {}
    for row in await conn.execute(query):
        found.setdefault(int(row.campaign_id), {})[str(row.kind)] = int(row.people or 0)
    return found


async def handed_over(conn: AsyncConnection, campaign_id: int) -> int:
    """Messages the provider accepted, summed over the campaign's batches (O(batches)): the
    rates' denominator when the caller has no recipient counts at hand."""
    query = select(func.coalesce(func.sum(campaign_batches.c.submitted_count), 0)).where(
        campaign_batches.c.campaign_id == campaign_id
    )
    return int((await conn.execute(query)).scalar() or 0)
