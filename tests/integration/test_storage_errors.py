"""Storage turns constraint violations into domain errors by constraint name, and only the
ones it names (HOUSE rule 20), on both dialects."""

import pytest
from sqlalchemy.exc import IntegrityError

from tests.support import rows
from tests.support.rows import NOW
from tidings.domain.errors import Conflict
from tidings.storage import newsletters as newsletter_queries
from tidings.storage.database import Database
from tidings.storage.errors import UnstorableValue

NEWSLETTER = {
    "name": "Weekly",
    "description": "",
    "sender_name": "Editor",
    "sender_address": "editor@example.org",
    "reply_to": None,
    "double_opt_in": True,
    "created_at": NOW,
    "updated_at": NOW,
}


async def test_a_taken_slug_is_a_conflict_on_the_slug_field(db: Database) -> None:
    """The admin must hear which field to change, not get a 500."""
    async with db.write() as conn:
        await rows.newsletter(conn, slug="weekly")
    with pytest.raises(Conflict, match="slug 'weekly' exists") as raised:
        async with db.write() as conn:
            await newsletter_queries.insert_newsletter(conn, slug="weekly", **NEWSLETTER)
    assert raised.value.field == "slug"


async def test_another_constraint_is_not_reported_as_a_taken_slug(db: Database) -> None:
    """A violation the query did not expect is a bug: it must surface, not be mislabelled."""
    async with db.write() as conn:
        existing = await rows.newsletter(conn, slug="weekly")
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await newsletter_queries.insert_newsletter(
                conn, id=existing, slug="other", **NEWSLETTER
            )


async def test_a_newsletter_with_a_campaign_cannot_be_deleted(db: Database) -> None:
    """RESTRICT keys become a conflict, though SQLite does not name the key it checked."""
    async with db.write() as conn:
        newsletter_id = await rows.newsletter(conn)
        await rows.campaign(conn, newsletter_id)
    with pytest.raises(Conflict, match="subscriptions or campaigns"):
        async with db.write() as conn:
            await newsletter_queries.delete_newsletter(conn, newsletter_id)


async def test_a_number_out_of_range_is_an_unstorable_value(db: Database) -> None:
    """The caller's bad input (422), not a server error, and nothing is written."""
    with pytest.raises(UnstorableValue):
        async with db.read() as conn:
            await newsletter_queries.get_by_id(conn, 2**70)
