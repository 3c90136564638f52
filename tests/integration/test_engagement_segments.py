"""Engagement segments in SQL (ENG-7): `engaged:DAYS` and `unengaged:DAYS` select, on SQLite
and PostgreSQL alike, exactly who the pure rule says: human hits only, the window's edge
inside, and nobody judged unengaged whose engagement we could not see."""

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from tests.support import person_engagement, rows
from tidings.domain.segments import Engagement, parse_filter
from tidings.storage.database import Database
from tidings.storage.sending.candidates import count_audience, count_unjudged, filter_clause
from tidings.storage.tables import newsletters, subscribers

NOW = rows.NOW + timedelta(days=100)
DAY = timedelta(days=1)


async def _people(db: Database) -> tuple[int, dict[str, int], dict[str, Engagement]]:
    """A per_person newsletter and one person per situation, with what is known of each."""
    async with db.write() as conn:
        newsletter_id = await rows.newsletter(conn, tracking="per_person")
        people = {}
        for name in ("human", "machine", "edge", "old", "silent", "unconsented", "untracked"):
            consent = None if name == "unconsented" else rows.NOW
            people[name] = await rows.subscriber(
                conn, tracking_consent_at=consent, tier="paid" if name == "human" else "free"
            )
            await rows.subscription(
                conn, people[name], newsletter_id, confirmed_at=rows.NOW, consent_evidence="t"
            )
        everyone = [people[name] for name in people if name != "untracked"]
        recent = await person_engagement.sent_campaign(
            conn, newsletter_id, everyone, at=NOW - 20 * DAY
        )
        await person_engagement.sent_campaign(
            conn, newsletter_id, [people["untracked"]], at=NOW - 20 * DAY, tracked=False
        )
        await person_engagement.hit(conn, recent, people["human"], at=NOW - 2 * DAY, kind="click")
        await person_engagement.hit(
            conn, recent, people["machine"], at=NOW - 2 * DAY, verdict="machine"
        )
        await person_engagement.hit(conn, recent, people["edge"], at=NOW - 30 * DAY)
        await person_engagement.hit(conn, recent, people["old"], at=NOW - 31 * DAY)
    sends = [NOW - 20 * DAY]
    known = {
        "human": Engagement(NOW, [NOW - 2 * DAY], sends),
        "machine": Engagement(NOW, [], sends),
        "edge": Engagement(NOW, [NOW - 30 * DAY], sends),
        "old": Engagement(NOW, [NOW - 31 * DAY], sends),
        "silent": Engagement(NOW, [], sends),
        "unconsented": Engagement(NOW, [], []),
        "untracked": Engagement(NOW, [], []),
    }
    return newsletter_id, people, known


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("engaged:30", {"human", "edge"}),
        ("unengaged:30", {"machine", "old", "silent"}),
        ("!engaged:30", {"machine", "old", "silent", "unconsented", "untracked"}),
        ("!unengaged:30", {"human", "edge", "unconsented", "untracked"}),
        ("engaged:31", {"human", "edge", "old"}),
        ("unengaged:10", set()),  # the only tracked send is older than the window
        ("tier:paid+engaged:30", {"human"}),
        ("tier:free+engaged:30,unengaged:30", {"edge", "machine", "old", "silent"}),
    ],
)
async def test_engagement_filter_in_sql_selects_who_the_rule_says(
    db: Database, text: str, expected: set[str]
) -> None:
    """A segment of engaged readers must count human opens and clicks only, include the hit
    exactly DAYS ago, and never call someone unengaged whose engagement we could not see;
    the preview count must agree with the selection."""
    newsletter_id, people, known = await _people(db)
    audience = parse_filter(text)
    by_id = {subscriber_id: name for name, subscriber_id in people.items()}
    tiers = {name: "paid" if name == "human" else "free" for name in people}
    assert {
        name for name in people if audience.matches(tiers[name], frozenset(), {}, known[name])
    } == expected
    async with db.read() as conn:
        query = select(subscribers.c.id).where(
            filter_clause(audience, newsletter_id=newsletter_id, now=NOW)
        )
        selected = {by_id[found] for found in (await conn.execute(query)).scalars()}
        counted = await count_audience(conn, newsletter_id, audience, now=NOW)
    assert selected == expected
    assert counted == len(expected)


async def test_the_preview_says_how_many_cannot_be_judged(db: Database) -> None:
    """An operator targeting `unengaged:90` must see that some subscribers are left out not
    for reading but for being invisible (no consent, or the newsletter not per_person)."""
    newsletter_id, _, _ = await _people(db)
    async with db.write() as conn:
        assert await count_unjudged(conn, newsletter_id) == 1  # the unconsented one
        await conn.execute(
            update(newsletters)
            .where(newsletters.c.id == newsletter_id)
            .values(tracking="aggregate")
        )
        assert await count_unjudged(conn, newsletter_id) == 7


async def test_unengaged_needs_the_newsletter_to_track_per_person(db: Database) -> None:
    """Hits are recorded per person only while the newsletter is per_person: once it is not,
    silence means nothing and nobody is judged unengaged."""
    newsletter_id, _, _ = await _people(db)
    audience = parse_filter("unengaged:30")
    async with db.write() as conn:
        await conn.execute(
            update(newsletters)
            .where(newsletters.c.id == newsletter_id)
            .values(tracking="aggregate")
        )
        assert await count_audience(conn, newsletter_id, audience, now=NOW) == 0
