"""Synthetic audiences for benchmarks and large tests, generated inside the database (no rows
shipped from Python): confirmed subscribers `reader-N@example.test`, tiers alternating free
and paid, every fifth one labelled `beta`; and what a benchmark sets up around them (a
newsletter, a campaign already sent, a preparation made to look interrupted)."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, insert, literal, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.dialect import UTCDateTime, is_postgresql
from tidings.storage.importing import refresh_statistics
from tidings.storage.newsletters import insert_newsletter
from tidings.storage.tables import (
    campaign_batches,
    campaign_recipients,
    campaign_sends,
    campaigns,
    engagement_counters,
    labels,
    newsletters,
    subscriber_labels,
    subscribers,
    subscriptions,
)

BETA_LABEL = "beta"


def _numbers(postgresql: bool, count: int) -> str:
    if postgresql:
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
    postgresql = is_postgresql(conn)
    first_id = (
        int((await conn.execute(select(func.coalesce(func.max(subscribers.c.id), 0)))).scalar_one())
        + 1
    )
    if count <= 0:  # SQLite's number series would still yield its first row
        return first_id
    stamp = "CAST(:now AS TIMESTAMPTZ)" if postgresql else ":now"
    json_empty = "CAST('{}' AS JSONB)" if postgresql else "'{}'"
    when = now if postgresql else now.replace(tzinfo=None).isoformat(" ")
    await conn.execute(
        text(
            "INSERT INTO subscribers (email, email_key, email_hash, name, tier, attributes,"
            " created_at, updated_at)"
            f" SELECT 'reader-' || (n + :offset) || '@example.test',"
            f" 'reader-' || (n + :offset) || '@example.test',"
            f" 'seed-' || (n + :offset),"
            f" 'Reader ' || (n + :offset),"
            f" CASE WHEN n % 2 = 0 THEN 'paid' ELSE 'free' END, {json_empty}, {stamp}, {stamp}"
            f" FROM ({_numbers(postgresql, count)}) AS numbers"
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
    recipient `sent`, its send finished and verified), for benchmarks of what comes back
    afterwards. Returns its id."""
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
        insert(campaign_sends).values(
            campaign_id=campaign_id,
            attempt_started_at=now,
            preflight_email_count=count,
            candidate_count=count,
            preparation_excluded_count=0,
            prepared_at=now,
            email_count=count,
            excluded_count=0,
            failed_count=0,
            uncertain_count=0,
            cancelled_count=0,
            finished_at=now,
            created_at=now,
            updated_at=now,
        )
    )
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


async def seed_newsletter(conn: AsyncConnection, *, slug: str, now: datetime) -> int:
    """A newsletter named Bench, written by the storage's own query, for benchmarks that run
    no container; returns its id."""
    row = await insert_newsletter(
        conn,
        slug=slug,
        name="Bench",
        description="",
        sender_name="Bench",
        sender_address="bench@example.org",
        reply_to=None,
        double_opt_in=True,
        created_at=now,
        updated_at=now,
    )
    return row.id


async def set_tracking(conn: AsyncConnection, newsletter_id: int, mode: str) -> None:
    """Turn the newsletter's open and click tracking to `mode` (ENG-1)."""
    await conn.execute(
        update(newsletters).where(newsletters.c.id == newsletter_id).values(tracking=mode)
    )


async def seed_engagement_counters(
    conn: AsyncConnection,
    campaign_id: int,
    *,
    segments: tuple[str, ...],
    links: int,
    hours: int,
    now: datetime,
) -> int:
    """The counters a busy campaign's hits leave (ENG-5): for each segment, its pixel and
    `links` links, opens and clicks, every hour of `hours`; returns the rows written."""
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours)
    rows = [
        {
            "campaign_id": campaign_id,
            "segment": segment,
            "number": number,
            "kind": kind,
            "hour": start + timedelta(hours=hour),
            "human_unique": 1000 // (hour + 1),
            "human_total": 1500 // (hour + 1),
            "machine_total": 3000 // (hour + 1),
        }
        for segment in segments
        for number in range(links + 1)
        for kind in (("open", "click") if number == 0 else ("click",))
        for hour in range(hours)
    ]
    for first in range(0, len(rows), 1000):
        await conn.execute(insert(engagement_counters).values(rows[first : first + 1000]))
    return len(rows)
