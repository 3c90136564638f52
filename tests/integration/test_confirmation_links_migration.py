"""Migration 0010 moves confirmation links into their own table without breaking any link
already in a mailbox (AUD-6)."""

from datetime import UTC, datetime, timedelta

from sqlalchemy import select, text

from tidings.domain import tokens
from tidings.storage import confirmations, migrate
from tidings.storage.database import Database
from tidings.storage.tables import confirmation_tokens

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


async def test_links_sent_before_the_upgrade_still_confirm(db: Database) -> None:
    """An upgrade must not void the confirmation emails people have not opened yet."""
    await migrate.downgrade(db, "0008")  # the revision before 0010
    token = tokens.new_confirmation_token()
    expires = NOW + timedelta(hours=72)
    async with db.write() as conn:
        await conn.execute(
            text(
                "INSERT INTO newsletters (id, slug, name, description, sender_name, "
                "sender_address, double_opt_in, created_at, updated_at) VALUES "
                "(1, 'weekly', 'Weekly', '', 'Ed', 'ed@example.org', true, :now, :now)"
            ),
            {"now": NOW},
        )
        await conn.execute(
            text(
                "INSERT INTO subscribers (id, email, email_key, email_hash, tier, attributes, "
                "created_at, updated_at) VALUES (1, 'a@example.org', 'a@example.org', 'h', "
                "'free', '{}', :now, :now)"
            ),
            {"now": NOW},
        )
        await conn.execute(
            text(
                "INSERT INTO subscriptions (id, subscriber_id, newsletter_id, source, "
                "created_at, updated_at, unsubscribe_count, confirm_token_hash, "
                "confirm_token_expires_at) VALUES (1, 1, 1, 'form', :now, :now, 0, :hash, "
                ":expires)"
            ),
            {"now": NOW, "hash": tokens.hash_token(token), "expires": expires},
        )
    await migrate.upgrade(db)
    async with db.read() as conn:
        found = await confirmations.find(conn, tokens.hash_token(token))
        rows = (await conn.execute(select(confirmation_tokens))).all()
    assert found is not None
    subscription, link_expires = found
    assert (subscription.id, link_expires) == (1, expires)
    assert len(rows) == 1
