"""Custom-field segment filters (AUD-12): `attr:city=Paris` compiled to SQL selects exactly
the people the pure rule says, on SQLite and PostgreSQL alike."""

from typing import Any

import pytest
from sqlalchemy import select

from tests.support import rows
from tidings.domain.segments import parse_filter
from tidings.storage.database import Database
from tidings.storage.sending.candidates import count_audience, filter_clause
from tidings.storage.tables import subscribers

PEOPLE: list[dict[str, Any]] = [
    {"city": "Paris", "age": 42},
    {"city": "paris", "age": "42"},
    {"city": "Lyon", "score": 1.5},
    {"vip": True, "city": ["Paris"]},
    {},
]


@pytest.mark.parametrize(
    "text",
    [
        "attr:city=Paris",
        "!attr:city=Paris",
        "attr:age=42",
        "attr:score=1.5",
        "attr:vip=true",
        "attr:vip=1",
        "attr:city=Lyon,attr:city=Paris",
        "tier:paid+attr:city=Paris",
        "attr:city=Paris+label:beta",
    ],
)
async def test_attribute_filter_in_sql_selects_who_the_rule_says(db: Database, text: str) -> None:
    """A campaign to `attr:city=Paris` must reach the same people whichever database runs
    the site, and the preview count must agree with the send."""
    audience = parse_filter(text)
    async with db.write() as conn:
        newsletter_id = await rows.newsletter(conn)
        expected = set()
        for number, attributes in enumerate(PEOPLE):
            tier = "paid" if number % 2 == 0 else "free"
            subscriber_id = await rows.subscriber(conn, attributes=attributes, tier=tier)
            await rows.subscription(
                conn, subscriber_id, newsletter_id, confirmed_at=rows.NOW, consent_evidence="test"
            )
            if audience.matches(tier, frozenset(), attributes):
                expected.add(subscriber_id)
        query = select(subscribers.c.id).where(filter_clause(audience))
        selected = set((await conn.execute(query)).scalars())
        counted = await count_audience(conn, newsletter_id, audience)
    assert selected == expected
    assert counted == len(expected)
