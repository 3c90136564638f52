"""Synthetic audiences for benchmarks and large tests, generated inside the database (no rows
shipped from Python): confirmed subscribers `reader-N@example.test`, tiers alternating free
and paid, every fifth one labelled `beta`."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, insert, literal, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.segments import AudienceFilter
from tidings.storage.importing import refresh_statistics
from tidings.storage.sending.candidates import audience
from tidings.storage.tables import (
    campaign_batches,
    campaign_recipients,
    campaign_sends,
    campaigns,
    labels,
    subscriber_labels,
    subscribers,
    subscriptions,
)
from tidings.storage.types import UTCDateTime

BETA_LABEL = "beta"


def _numbers(dialect: str, count: int) -> str:
    if dialect == "postgresql":
        return f"SELECT n FROM generate_series(1, {int(count)}) AS g(n)"
    return (
        "WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq"
        f" WHERE n < {int(count)}) SELECT n FROM seq"
    )


async def seed_audience(
    conn: AsyncConnection, *, newsletter_id: int, count: int, now: datetime
) -> int:
    """Add `count` confirmed subscribers of `newsletter_id`, numbered after the existing ones
    (`reader-<n>`); returns the first new id."""
    dialect = conn.dialect.name
    first_id = (
        int((await conn.execute(select(func.coalesce(func.max(subscribers.c.id), 0)))).scalar_one())
        + 1
    )
    if count <= 0:  # SQLite's number series would still yield its first row
        return first_id
    stamp = "CAST(:now AS TIMESTAMPTZ)" if dialect == "postgresql" else ":now"
    json_empty = "CAST('{}' AS JSONB)" if dialect == "postgresql" else "'{}'"
    when = now if dialect == "postgresql" else now.replace(tzinfo=None).isoformat(" ")
    await conn.execute(
        text(
            "INSERT INTO subscribers (email, email_key, email_hash, name, tier, attributes,"
            " created_at, updated_at)"
            f" SELECT 'reader-' || (n + :offset) || '@example.test',"
            f" 'reader-' || (n + :offset) || '@example.test',"
            f" 'seed-' || (n + :offset),"
            f" 'Reader ' || (n + :offset),"
            f" CASE WHEN n % 2 = 0 THEN 'paid' ELSE 'free' END, {json_empty}, {stamp}, {stamp}"
            f" FROM ({_numbers(dialect, count)}) AS numbers"
        ),
        {"offset": first_id - 1, "now": when},
    )
    await conn.execute(
        insert(subscriptions).from_select(
            [
                "subscriber_id",
                "newsletter_id",
                "source",
                "created_at",
                "updated_at",
                "confirmed_at",
            ],
            select(
                subscribers.c.id,
                literal(newsletter_id),
                literal("import"),
                subscribers.c.created_at,
                subscribers.c.created_at,
                subscribers.c.created_at,
            ).where(subscribers.c.id >= first_id),
        )
    )
    label_id = (
        await conn.execute(select(labels.c.id).where(labels.c.name == BETA_LABEL))
    ).scalar_one_or_none()
    if label_id is None:
        label_id = (
            await conn.execute(
                insert(labels).values(name=BETA_LABEL, created_at=now).returning(labels.c.id)
            )
        ).scalar_one()
    await conn.execute(
        insert(subscriber_labels).from_select(
            ["subscriber_id", "label_id"],
            select(subscribers.c.id, literal(label_id)).where(
                subscribers.c.id >= first_id, subscribers.c.id % 5 == 0
            ),
        )
    )
    # As an import does: the planner must see the grown tables, or it answers each batch's
    # 1,000-row lookup with a scan of the whole audience.
    await refresh_statistics(conn)
    return first_id


async def reference_insert_select(
    conn: AsyncConnection, campaign_id: int, newsletter_id: int, audience_filter: AudienceFilter
) -> int:
    """The benchmark's yardstick (BEN-1): the same audience written as recipient rows by ONE
    bare INSERT … SELECT, no pages, no verification. Returns the rows written."""
    chosen = audience(newsletter_id, audience_filter).subquery()
    await conn.execute(
        insert(campaign_recipients).from_select(
            ["campaign_id", "subscriber_id", "position", "state", "updated_at"],
            select(
                literal(campaign_id),
                chosen.c.subscriber_id,
                literal(0),
                literal("excluded"),
                func.current_timestamp(),
            ),
        )
    )
    counted = select(func.count()).where(campaign_recipients.c.campaign_id == campaign_id)
    return int((await conn.execute(counted)).scalar_one())


async def forget_preparation(conn: AsyncConnection, campaign_id: int) -> None:
    """Make a complete preparation look interrupted just before `prepared_at` was saved, so
    the next attempt must discard and rebuild it (the BEN-1 rebuild phase)."""
    await conn.execute(
        update(campaign_sends)
        .where(campaign_sends.c.campaign_id == campaign_id)
        .values(prepared_at=None)
    )


async def seed_sent_campaign(
    conn: AsyncConnection, *, newsletter_id: int, sending_domain: str, now: datetime
) -> int:
    """A campaign already handed over to every subscriber of `newsletter_id` (one batch, each
    recipient `sent`), for benchmarks of what comes back afterwards. Returns its id."""
    campaign_id = (
        await conn.execute(
            insert(campaigns)
            .values(
                newsletter_id=newsletter_id,
                status="submitted",
                subject="Bench",
                body="Bench",
                body_format="markdown",
                created_at=now,
                updated_at=now,
            )
            .returning(campaigns.c.id)
        )
    ).scalar_one()
    members = select(subscriptions.c.subscriber_id).where(
        subscriptions.c.newsletter_id == newsletter_id
    )
    count = int(
        (await conn.execute(select(func.count()).select_from(members.subquery()))).scalar_one()
    )
    batch_id = (
        await conn.execute(
            insert(campaign_batches)
            .values(
                campaign_id=campaign_id,
                page=0,
                segment="free",
                sending_domain=sending_domain,
                first_position=0,
                last_position=count,
                status="submitted",
                recipient_count=count,
                created_at=now,
                updated_at=now,
            )
            .returning(campaign_batches.c.id)
        )
    ).scalar_one()
    await conn.execute(
        insert(campaign_recipients).from_select(
            ["campaign_id", "batch_id", "subscriber_id", "position", "state", "updated_at"],
            select(
                literal(campaign_id),
                literal(batch_id),
                subscriptions.c.subscriber_id,
                subscriptions.c.subscriber_id,
                literal("sent"),
                literal(now, UTCDateTime()),
            ).where(subscriptions.c.newsletter_id == newsletter_id),
        )
    )
    return int(campaign_id)


async def database_bytes(conn: AsyncConnection) -> int:
    """The database's size: `pg_database_size` on PostgreSQL; on SQLite the pages in use
    (free pages left by deleted rows are not counted) times the page size."""
    if conn.dialect.name == "postgresql":
        query = text("SELECT pg_database_size(current_database())")
        return int((await conn.execute(query)).scalar_one())
    pages = (await conn.execute(text("PRAGMA page_count"))).scalar_one()
    free = (await conn.execute(text("PRAGMA freelist_count"))).scalar_one()
    page_size = (await conn.execute(text("PRAGMA page_size"))).scalar_one()
    return (int(pages) - int(free)) * int(page_size)


async def wal_position(conn: AsyncConnection) -> int | None:
    """PostgreSQL's current write-ahead log position in bytes (None on SQLite): the WAL a
    piece of work wrote is the difference of two readings."""
    if conn.dialect.name != "postgresql":
        return None
    query = text("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')")
    return int((await conn.execute(query)).scalar_one())


async def next_transaction_id(conn: AsyncConnection) -> int | None:
    """PostgreSQL's next transaction id (None on SQLite), read without taking one: ids go
    only to transactions that write, so two readings count the writing transactions
    committed or rolled back between them (this server's other databases too)."""
    if conn.dialect.name != "postgresql":
        return None
    query = text("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
    return int((await conn.execute(query)).scalar_one())


async def batch_count(conn: AsyncConnection, campaign_id: int) -> int:
    query = select(func.count()).where(campaign_batches.c.campaign_id == campaign_id)
    return int((await conn.execute(query)).scalar_one())
