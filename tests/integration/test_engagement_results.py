"""A campaign's opens and clicks as results (ENG-5), read from the counters on both dialects:
people and machines apart, per segment, link and hour, with honest rates, and nothing at all
where nothing was measured."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.support import rows
from tests.support.engagement_rows import HOUR, Counted, add_counters, add_links
from tidings.domain.errors import NotFound
from tidings.engagement.results import Reach, campaign_engagement
from tidings.storage.campaign_links import StoredLink
from tidings.storage.database import Database

LATER = HOUR + timedelta(hours=1)
LAST = HOUR + timedelta(hours=2)


async def _campaign(db: Database, tracking: str) -> int:
    async with db.write() as conn:
        newsletter_id = await rows.newsletter(conn, tracking=tracking)
        return await rows.campaign(conn, newsletter_id, status="submitted")


async def _busy_campaign(db: Database, tracking: str = "aggregate") -> int:
    """Two segments; link 1 is the same URL in both, free's link 3 is hidden, paid's link 2
    was never clicked; another campaign's counters sit beside it."""
    campaign_id = await _campaign(db, tracking)
    other_id = await _campaign(db, "aggregate")
    async with db.write() as conn:
        await add_links(
            conn,
            campaign_id,
            "free",
            StoredLink(1, "https://a.example/"),
            StoredLink(2, "https://b.example/"),
            StoredLink(3, "https://trap.example/", hidden=True),
        )
        await add_links(
            conn,
            campaign_id,
            "paid",
            StoredLink(1, "https://a.example/"),
            StoredLink(2, "https://paid.example/"),
        )
        await add_counters(
            conn,
            campaign_id,
            Counted("free", 0, "open", 10, 14, 30),
            Counted("free", 0, "open", 2, 3, 0, hour=LAST),
            Counted("paid", 0, "open", 5, 6, 8),
            Counted("free", 0, "click", 4, 6, 7),  # the hidden link's 2 machine hits included
            Counted("paid", 0, "click", 1, 1, 0, hour=LATER),
            Counted("free", 1, "click", 3, 4, 3),
            Counted("free", 2, "click", 1, 2, 2),
            Counted("free", 3, "click", 0, 0, 2),
            Counted("paid", 1, "click", 1, 1, 0, hour=LATER),
        )
        await add_counters(conn, other_id, Counted("free", 0, "open", 900, 900, 900))
    return campaign_id


def figures(human_unique: int, human_total: int, machine_total: int) -> dict[str, int]:
    return {
        "human_unique": human_unique,
        "human_total": human_total,
        "machine_total": machine_total,
    }


async def test_results_add_up_people_and_machines_per_segment_link_and_hour(db: Any) -> None:
    """The numbers an author acts on must add up exactly: the same link in two segments is one
    link, a hidden link's hits are machines' only, and another campaign's hits never leak in."""
    campaign_id = await _busy_campaign(db)
    found = await campaign_engagement(db, campaign_id, reach=Reach(sent=40))
    assert found.as_json() == {
        "tracking": "aggregate",
        "opens": figures(17, 23, 38),
        "clicks": figures(5, 7, 7),
        "rates": {
            "denominator": "sent",
            "denominator_count": 40,
            "open_rate": 0.425,
            "click_through_rate": 0.125,
        },
        "links": [
            {"url": "https://a.example/", **figures(4, 5, 3)},
            {"url": "https://b.example/", **figures(1, 2, 2)},
            {"url": "https://paid.example/", **figures(0, 0, 0)},
        ],
        "segments": {
            "free": {"opens": figures(12, 17, 30), "clicks": figures(4, 6, 7)},
            "paid": {"opens": figures(5, 6, 8), "clicks": figures(1, 1, 0)},
        },
        "over_time": [
            {"hour": HOUR.isoformat(), "opens": 15, "clicks": 4},
            {"hour": LATER.isoformat(), "opens": 0, "clicks": 1},
            {"hour": LAST.isoformat(), "opens": 2, "clicks": 0},
        ],
    }


async def test_results_read_on_a_connection_the_caller_holds(db: Any) -> None:
    """The benchmark and other readers may pass their own connection instead of the database."""
    campaign_id = await _busy_campaign(db)
    async with db.read() as conn:
        found = await campaign_engagement(conn, campaign_id)
    assert found.opens.human_unique == 17


@pytest.mark.parametrize(
    ("reach", "denominator", "count", "open_rate", "click_rate"),
    [
        (Reach(sent=40, delivered=34), "delivered", 34, 0.5, 0.1471),
        (Reach(sent=40, delivered=0), "sent", 40, 0.425, 0.125),  # a relay reports nothing
        (None, "sent", 0, None, None),  # no batch handed anything over: no rate at all
    ],
)
async def test_rates_divide_by_delivered_when_reported_else_by_sent(
    db: Any,
    reach: Reach | None,
    denominator: str,
    count: int,
    open_rate: float | None,
    click_rate: float | None,
) -> None:
    """Dividing by sent when the provider reports deliveries would understate the rates, and
    dividing by a delivered count of 0 from a plain relay would be meaningless."""
    campaign_id = await _busy_campaign(db)
    found = (await campaign_engagement(db, campaign_id, reach=reach)).as_json()
    assert found["rates"] == {
        "denominator": denominator,
        "denominator_count": count,
        "open_rate": open_rate,
        "click_through_rate": click_rate,
    }


async def test_tracking_off_without_counters_shows_no_figures_at_all(db: Any) -> None:
    """A zero for something never measured reads as 'nobody opened it': say it is not tracked."""
    campaign_id = await _campaign(db, "off")
    found = await campaign_engagement(db, campaign_id, reach=Reach(sent=10, delivered=9))
    assert found.measured is False
    assert found.as_json() == {"tracking": "off"}


async def test_tracking_turned_off_later_keeps_what_was_counted(db: Any) -> None:
    """Turning tracking off for future issues must not hide the counts of one already sent."""
    campaign_id = await _busy_campaign(db, tracking="off")
    found = await campaign_engagement(db, campaign_id)
    assert found.measured is True
    assert found.as_json()["tracking"] == "off"
    assert found.clicks.human_unique == 5


async def test_tracking_on_with_nothing_counted_yet_shows_zeros(db: Any) -> None:
    """With tracking on, a campaign nobody opened yet really has zero opens."""
    campaign_id = await _campaign(db, "per_person")
    found = (await campaign_engagement(db, campaign_id, reach=Reach(sent=3))).as_json()
    assert found["tracking"] == "per_person"
    assert found["opens"] == figures(0, 0, 0)
    assert found["rates"]["open_rate"] == 0.0
    assert found["links"] == []
    assert found["over_time"] == []


async def test_results_of_an_unknown_campaign_are_not_found(db: Any) -> None:
    """A wrong id must be a clear 404 for the API and the CLI, never an empty result."""
    with pytest.raises(NotFound):
        await campaign_engagement(db, 4242)
