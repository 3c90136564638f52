"""Migration 0024 decides the archive flag of campaigns that already exist (issue 35 item 3,
API-4): only those sent to everyone stay public."""

from datetime import UTC, datetime

from sqlalchemy import select, text

from tidings.storage import migrate
from tidings.storage.database import Database
from tidings.storage.tables import campaigns

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


async def test_upgrade_withdraws_issues_sent_to_a_filtered_audience(db: Database) -> None:
    """Issues sent to paid readers before the upgrade must leave the archive with it, not
    stay published until an operator notices."""
    await migrate.downgrade(db, "0023")
    async with db.write() as conn:
        await conn.execute(
            text(
                "INSERT INTO newsletters (id, slug, name, description, sender_name, "
                "sender_address, double_opt_in, archive, created_at, updated_at) VALUES "
                "(1, 'weekly', 'Weekly', '', 'Ed', 'ed@example.org', true, true, :now, :now)"
            ),
            {"now": NOW},
        )
        for campaign_id, audience in enumerate(("", "tier:paid", "label:beta", "attr:a=b"), 1):
            await conn.execute(
                text(
                    "INSERT INTO campaigns (id, newsletter_id, status, subject, preheader, body, "
                    "body_format, audience_filter, created_at, updated_at) VALUES (:id, 1, "
                    "'submitted', 'S', '', 'B', 'markdown', :audience, :now, :now)"
                ),
                {"id": campaign_id, "audience": audience, "now": NOW},
            )
    await migrate.upgrade(db)
    async with db.read() as conn:
        rows = await conn.execute(
            select(campaigns.c.audience_filter, campaigns.c.archive_public).order_by(campaigns.c.id)
        )
        flags = {row.audience_filter: row.archive_public for row in rows}
    assert flags == {"": True, "tier:paid": False, "label:beta": False, "attr:a=b": False}
