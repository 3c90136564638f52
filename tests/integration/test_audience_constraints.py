"""The database itself refuses forbidden audience rows (AUD-2, AUD-3), on both dialects."""

import pytest
from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError

from tests.support import rows
from tests.support.rows import NOW
from tidings.storage.database import Database
from tidings.storage.tables import newsletters


async def _seed(db: Database) -> tuple[int, int]:
    async with db.write() as conn:
        newsletter_id = await rows.newsletter(conn, slug="weekly")
        subscriber_id = await rows.subscriber(conn, email="Ann@example.org")
    return newsletter_id, subscriber_id


async def test_unsubscribed_without_history_is_refused(db: Database) -> None:
    """A row "unsubscribed now, never unsubscribed" must not exist: after a complaint, the history
    is what proves the person had asked to leave."""
    newsletter_id, subscriber_id = await _seed(db)
    for bad in (
        {"unsubscribed_at": NOW},
        {"unsubscribed_at": NOW, "unsubscribe_count": 1},
        {"unsubscribed_at": NOW, "last_unsubscribed_at": NOW},
    ):
        with pytest.raises(IntegrityError):
            async with db.write() as conn:
                await rows.subscription(conn, subscriber_id, newsletter_id, **bad)
    async with db.write() as conn:
        await rows.subscription(conn, subscriber_id, newsletter_id, unsubscribed=True)


async def test_one_subscription_per_subscriber_and_newsletter(db: Database) -> None:
    """Not partial: a re-subscribe must revive the row that carries the history."""
    newsletter_id, subscriber_id = await _seed(db)
    async with db.write() as conn:
        await rows.subscription(conn, subscriber_id, newsletter_id)
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await rows.subscription(conn, subscriber_id, newsletter_id, confirmed_at=NOW)


async def test_one_subscriber_per_address_whatever_the_case(db: Database) -> None:
    """Two spellings of one mailbox are one person: one consent record, one unsubscribe."""
    await _seed(db)
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await rows.subscriber(conn, email="ann@example.org", email_hash="h2")


async def test_unknown_tier_and_source_are_refused(db: Database) -> None:
    """Segments and consent evidence read these columns; a value outside the list is no value."""
    newsletter_id, subscriber_id = await _seed(db)
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await rows.subscriber(conn, tier="gold")
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await rows.subscription(conn, subscriber_id, newsletter_id, source="scraped")


async def test_email_key_must_be_lower_case(db: Database) -> None:
    """Case-insensitive uniqueness rests on email_key being lower-case; the database holds it."""
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await rows.subscriber(conn, email="Zed@example.org", email_key="Zed@example.org")


async def test_a_newsletter_with_subscriptions_cannot_be_deleted(db: Database) -> None:
    """RESTRICT, not CASCADE: deleting a list must never silently erase consent records."""
    newsletter_id, subscriber_id = await _seed(db)
    async with db.write() as conn:
        await rows.subscription(conn, subscriber_id, newsletter_id)
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await conn.execute(delete(newsletters).where(newsletters.c.id == newsletter_id))
