"""A campaign's opens and clicks (ENG-5): people and machines apart, per segment and link,
over time, with open and click-through rates, read from the counters alone (O(links x hours)).

With tracking `off` and no counters the result holds no figures at all: nothing is shown as a
zero that was never measured."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.engagement_figures import Figures
from tidings.domain.errors import NotFound
from tidings.domain.tracking import HitKind, TrackingMode
from tidings.storage import engagement_counts as queries
from tidings.storage.database import Database

NOT_TRACKED = "Opens and clicks are not tracked for this newsletter"
TURN_ON = "tidings newsletters tracking SLUG aggregate"


@dataclass(frozen=True, slots=True)
class Reach:
    """How many messages went out and how many the provider reported delivered (0: it
    reports nothing, like a plain SMTP relay)."""

    sent: int
    delivered: int = 0


@dataclass(frozen=True, slots=True)
class LinkClicks:
    url: str
    clicks: Figures


@dataclass(frozen=True, slots=True)
class HourPeople:
    """Messages first opened, and first clicked, by a person in this hour."""

    hour: datetime
    opens: int
    clicks: int


@dataclass(frozen=True, slots=True)
class CampaignEngagement:
    campaign_id: int
    tracking: str
    measured: bool  # False: tracking off and nothing counted, so no figure means anything
    reach: Reach
    opens: Figures = field(default_factory=Figures)
    clicks: Figures = field(default_factory=Figures)
    segments: dict[str, tuple[Figures, Figures]] = field(default_factory=dict)
    links: list[LinkClicks] = field(default_factory=list)
    over_time: list[HourPeople] = field(default_factory=list)

    @property
    def denominator(self) -> str:
        """`delivered` once the provider reports deliveries, else `sent`."""
        return "delivered" if self.reach.delivered else "sent"

    def rate(self, figures: Figures) -> float | None:
        """People's unique hits as a share of the denominator; None before anything went out."""
        count = self.reach.delivered or self.reach.sent
        return round(figures.human_unique / count, 4) if count else None

    def as_json(self) -> dict[str, Any]:
        if not self.measured:
            return {"tracking": self.tracking}
        return {
            "tracking": self.tracking,
            "opens": _json(self.opens),
            "clicks": _json(self.clicks),
            "rates": {
                "denominator": self.denominator,
                "denominator_count": self.reach.delivered or self.reach.sent,
                "open_rate": self.rate(self.opens),
                "click_through_rate": self.rate(self.clicks),
            },
            "links": [{"url": link.url, **_json(link.clicks)} for link in self.links],
            "segments": {
                name: {"opens": _json(opens), "clicks": _json(clicks)}
                for name, (opens, clicks) in self.segments.items()
            },
            "over_time": [
                {"hour": point.hour.isoformat(), "opens": point.opens, "clicks": point.clicks}
                for point in self.over_time
            ],
        }


def _json(figures: Figures) -> dict[str, int]:
    return {
        "human_unique": figures.human_unique,
        "human_total": figures.human_total,
        "machine_total": figures.machine_total,
    }


class EngagementResults:
    """The use case as the entry points hold it (built in bootstrap)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def campaign(self, campaign_id: int, *, reach: Reach | None = None) -> CampaignEngagement:
        return await campaign_engagement(self._db, campaign_id, reach=reach)


async def campaign_engagement(
    db_or_conn: Database | AsyncConnection, campaign_id: int, *, reach: Reach | None = None
) -> CampaignEngagement:
    """The campaign's engagement; `reach` (from the caller's own recipient counts) sets the
    rates' denominator, else the messages its batches handed over. NotFound: no campaign."""
    if isinstance(db_or_conn, Database):
        async with db_or_conn.read() as conn:
            return await _read(conn, campaign_id, reach)
    return await _read(db_or_conn, campaign_id, reach)


async def _read(conn: AsyncConnection, campaign_id: int, reach: Reach | None) -> CampaignEngagement:
    tracking = await queries.tracking_of(conn, campaign_id)
    if tracking is None:
        raise NotFound(f"no campaign with id {campaign_id}")
    by_segment = await queries.segment_figures(conn, campaign_id)
    if reach is None:
        reach = Reach(sent=await queries.handed_over(conn, campaign_id))
    if tracking == TrackingMode.OFF and not by_segment:
        return CampaignEngagement(campaign_id, tracking, measured=False, reach=reach)
    links = await queries.link_figures(conn, campaign_id)
    hourly = await queries.hourly_people(conn, campaign_id)
    segments: dict[str, tuple[Figures, Figures]] = {}
    for (segment, kind), figures in by_segment.items():
        opens, clicks = segments.get(segment, (Figures(), Figures()))
        segments[segment] = (
            (opens.plus(figures), clicks) if kind == HitKind.OPEN else (opens, clicks.plus(figures))
        )
    return CampaignEngagement(
        campaign_id,
        tracking,
        measured=True,
        reach=reach,
        opens=_sum(opens for opens, _ in segments.values()),
        clicks=_sum(clicks for _, clicks in segments.values()),
        segments=segments,
        links=_by_url(links),
        over_time=_by_hour(hourly),
    )


def _sum(figures: Iterable[Figures]) -> Figures:
    total = Figures()
    for each in figures:
        total = total.plus(each)
    return total


def _by_url(links: list[queries.LinkFigures]) -> list[LinkClicks]:
    """One row per URL (the same link in several segments is one link to the author), most
    clicked by people first, then in the order the links appear."""
    clicks: dict[str, Figures] = {}
    for link in links:
        clicks[link.url] = clicks.get(link.url, Figures()).plus(link.clicks)
    ordered = sorted(clicks.items(), key=lambda item: -item[1].human_unique)
    return [LinkClicks(url, figures) for url, figures in ordered]


def _by_hour(hourly: list[tuple[datetime, str, int]]) -> list[HourPeople]:
    people: dict[datetime, dict[str, int]] = defaultdict(dict)
    for hour, kind, count in hourly:
        people[hour][kind] = count
    return [
        HourPeople(hour, kinds.get(HitKind.OPEN, 0), kinds.get(HitKind.CLICK, 0))
        for hour, kinds in sorted(people.items())
    ]
