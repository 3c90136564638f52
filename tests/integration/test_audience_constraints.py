"""The database itself refuses forbidden audience rows (AUD-2, AUD-3), on both dialects."""

from datetime import UTC, datetime

import pytest
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from tidings.storage.database import Database
from tidings.storage.tables import newsletters, subscribers, subscriptions

NOW = datetime(2026, 1, 1, tzinfo=UTC)


async def _seed(db: Database) -> tuple[int, int]:
    async with db.write() as conn:
        newsletter_id = (
            await conn.execute(
                insert(newsletters)
                .values(
                    slug="weekly",
                    name="Weekly",
                    sender_name="W",
                    sender_address="w@example.org",
                    created_at=NOW,
                    updated_at=NOW,
                )
                .returning(newsletters.c.id)
            )
        ).scalar_one()
        subscriber_id = (
            await conn.execute(
                insert(subscribers)
                .values(
                    email="Ann@example.org",
                    email_key="ann@example.org",
                    email_hash="h1",
                    tier="free",
                    attributes={},
                    created_at=NOW,
                    updated_at=NOW,
                )
                .returning(subscribers.c.id)
            )
        ).scalar_one()
    return newsletter_id, subscriber_id


def _subscription(newsletter_id: int, subscriber_id: int, **values: object) -> dict[str, object]:
    return {
        "newsletter_id": newsletter_id,
        "subscriber_id": subscriber_id,
        "source": "form",
        "created_at": NOW,
        "updated_at": NOW,
        **values,
    }


async def test_unsubscribed_without_history_is_refused(db: Database) -> None:
    # "Unsubscribed now, never unsubscribed" must not exist: after a complaint, the history
    # is what proves the person had asked to leave.
    newsletter_id, subscriber_id = await _seed(db)
    for bad in (
        {"unsubscribed_at": NOW},
        {"unsubscribed_at": NOW, "unsubscribe_count": 1},
        {"unsubscribed_at": NOW, "last_unsubscribed_at": NOW},
    ):
        with pytest.raises(IntegrityError):
            async with db.write() as conn:
                await conn.execute(
                    insert(subscriptions).values(_subscription(newsletter_id, subscriber_id, **bad))
                )
    async with db.write() as conn:
        await conn.execute(
            insert(subscriptions).values(
                _subscription(
                    newsletter_id,
                    subscriber_id,
                    unsubscribed_at=NOW,
                    unsubscribe_count=1,
                    last_unsubscribed_at=NOW,
                )
            )
        )


async def test_one_subscription_per_subscriber_and_newsletter(db: Database) -> None:
    # Not partial: a re-subscribe must revive the row that carries the history.
    newsletter_id, subscriber_id = await _seed(db)
    async with db.write() as conn:
        await conn.execute(
            insert(subscriptions).values(_subscription(newsletter_id, subscriber_id))
        )
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await conn.execute(
                insert(subscriptions).values(
                    _subscription(newsletter_id, subscriber_id, confirmed_at=NOW)
                )
            )


async def test_one_subscriber_per_address_whatever_the_case(db: Database) -> None:
    await _seed(db)
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await conn.execute(
                insert(subscribers).values(
                    email="ann@example.org",
                    email_key="ann@example.org",
                    email_hash="h2",
                    tier="free",
                    attributes={},
                    created_at=NOW,
                    updated_at=NOW,
                )
            )


async def test_unknown_tier_and_source_are_refused(db: Database) -> None:
    newsletter_id, subscriber_id = await _seed(db)
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await conn.execute(
                insert(subscribers).values(
                    email="b@example.org",
                    email_key="b@example.org",
                    email_hash="h3",
                    tier="gold",
                    attributes={},
                    created_at=NOW,
                    updated_at=NOW,
                )
            )
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await conn.execute(
                insert(subscriptions).values(
                    _subscription(newsletter_id, subscriber_id, source="scraped")
                )
            )


async def test_email_key_must_be_lower_case(db: Database) -> None:
    # Case-insensitive uniqueness rests on email_key being lower-case; the database holds it.
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await conn.execute(
                insert(subscribers).values(
                    email="Zed@example.org",
                    email_key="Zed@example.org",
                    email_hash="h9",
                    tier="free",
                    attributes={},
                    created_at=NOW,
                    updated_at=NOW,
                )
            )


async def test_a_newsletter_with_subscriptions_cannot_be_deleted(db: Database) -> None:
    # RESTRICT, not CASCADE: deleting a list must never silently erase consent records.
    from sqlalchemy import delete

    newsletter_id, subscriber_id = await _seed(db)
    async with db.write() as conn:
        await conn.execute(
            insert(subscriptions).values(_subscription(newsletter_id, subscriber_id))
        )
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await conn.execute(delete(newsletters).where(newsletters.c.id == newsletter_id))
