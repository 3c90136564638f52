"""Named queries for what happened to campaign mail after hand-over (PRV-6, SND-27): each
recipient row's reported outcome, and the campaign statistics counted from those rows.

Each outcome column only moves one way (the earliest delivery, complaint and unsubscribe;
the strongest bounce, then the latest of that kind), so an event arriving twice or out of
order leaves the same row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, case, func, literal, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.bulk import pairs_among
from tidings.storage.dialect import UTCDateTime, hour_of
from tidings.storage.tables import (
    campaign_batches,
    campaign_recipients,
    campaigns,
    inbound_events,
)

OUTCOME_COUNTS = ("sent", "delivered", "hard_bounced", "soft_bounced", "complained", "unsubscribed")


async def recipient_of(conn: AsyncConnection, campaign_id: int, subscriber_id: int) -> int | None:
    query = select(campaign_recipients.c.id).where(
        campaign_recipients.c.campaign_id == campaign_id,
        campaign_recipients.c.subscriber_id == subscriber_id,
    )
    return (await conn.execute(query)).scalar()


async def recipients_of(
    conn: AsyncConnection, pairs: Iterable[tuple[int, int]]
) -> dict[tuple[int, int], int]:
    """Recipient row ids by (campaign id, subscriber id), in one query."""
    wanted = list(set(pairs))
    if not wanted:
        return {}
    row = campaign_recipients.c
    query = select(row.id, row.campaign_id, row.subscriber_id).where(
        pairs_among(conn, row.campaign_id, row.subscriber_id, wanted)
    )
    return {
        (int(r.campaign_id), int(r.subscriber_id)): int(r.id) for r in await conn.execute(query)
    }


async def record_deliveries(conn: AsyncConnection, deliveries: list[tuple[int, datetime]]) -> None:
    """`record_outcome(kind="delivered")` for many rows in one executemany round trip (SQLite;
    PostgreSQL does it inside `delivered_events`' one statement)."""
    if not deliveries:
        return
    at = bindparam("at", type_=UTCDateTime())
    statement = (
        update(campaign_recipients)
        .where(campaign_recipients.c.id == bindparam("recipient"))
        .values(**outcome_values(campaign_recipients.c, kind="delivered", at=at))
    )
    await conn.execute(statement, [{"recipient": rid, "at": when} for rid, when in deliveries])


async def recipient_by_id(
    conn: AsyncConnection, recipient_id: int
) -> tuple[int, int | None] | None:
    """(campaign id, subscriber id) of a recipient row, or None."""
    query = select(campaign_recipients.c.campaign_id, campaign_recipients.c.subscriber_id).where(
        campaign_recipients.c.id == recipient_id
    )
    row = (await conn.execute(query)).first()
    return None if row is None else (int(row.campaign_id), row.subscriber_id)


async def newsletter_of(conn: AsyncConnection, campaign_id: int) -> int | None:
    query = select(campaigns.c.newsletter_id).where(campaigns.c.id == campaign_id)
    return (await conn.execute(query)).scalar()


def _earliest(column: Any, at: datetime | ColumnElement[datetime]) -> dict[str, Any]:
    return {column.name: case((or_(column.is_(None), column > at), at), else_=column)}


@dataclass(frozen=True, slots=True)
class FirstOutcome:
    """What one event made true of a recipient for the first time (the auto-pause counts)."""

    hard_bounced: bool = False
    complained: bool = False


def outcome_values(
    columns: Any, *, kind: str, at: datetime | ColumnElement[datetime], code: str | None = None
) -> dict[str, Any]:
    """The SET of an UPDATE folding one reported event (`delivered`, `soft_bounce`,
    `hard_bounce`, `complaint`, `unsubscribe`) into a row with outcome columns (a campaign's
    recipient, a transactional message): each moves one way, so events arriving twice or out
    of order leave the same row."""
    if kind == "delivered":
        return _earliest(columns.delivered_at, at)
    if kind == "complaint":
        return _earliest(columns.complained_at, at)
    if kind == "unsubscribe":
        return _earliest(columns.unsubscribed_at, at)
    bounce = "hard" if kind == "hard_bounce" else "soft"
    rank = 2 if bounce == "hard" else 1
    current = case((columns.bounce_kind == "hard", 2), (columns.bounce_kind == "soft", 1), else_=0)
    weaker, same = current.in_(list(range(rank))), current.in_([rank])
    # Replace when stronger, or as strong and later: the same for any arrival order.
    wins = or_(weaker, and_(same, columns.bounced_at < at))
    return {
        "bounce_kind": case((wins, bounce), else_=columns.bounce_kind),
        "bounce_code": case((wins, code), else_=columns.bounce_code),
        "bounced_at": case((wins, at), else_=columns.bounced_at),
    }


async def record_outcome(
    conn: AsyncConnection, recipient_id: int, *, kind: str, at: datetime, code: str | None
) -> FirstOutcome:
    """Fold one reported event into the recipient row (`outcome_values`); returns whether it
    first made the recipient hard-bounced or complaining. The row is read locked
    (PostgreSQL), so two events for one recipient in concurrent transactions cannot both
    count it."""
    row = campaign_recipients.c
    first = FirstOutcome()
    if kind in ("hard_bounce", "complaint"):
        before = (
            await conn.execute(
                select(row.bounce_kind, row.complained_at)
                .where(row.id == recipient_id)
                .with_for_update()
            )
        ).first()
        if before is not None:
            first = FirstOutcome(
                hard_bounced=kind == "hard_bounce" and before.bounce_kind != "hard",
                complained=kind == "complaint" and before.complained_at is None,
            )
    values = outcome_values(row, kind=kind, at=at, code=code)
    await conn.execute(update(campaign_recipients).where(row.id == recipient_id).values(**values))
    return first


async def attribute_unsubscribe(
    conn: AsyncConnection,
    *,
    subscriber_id: int,
    newsletter_id: int,
    recipient_id: int | None,
    at: datetime,
) -> None:
    """Count an unsubscribe through a mailed link against its campaign: the recipient row
    the link names, if it is this person's row of a campaign of this newsletter; else (a
    link without one) the newsletter's latest campaign sent to the person."""
    row = campaign_recipients.c
    query = (
        select(row.id)
        .join(campaigns, campaigns.c.id == row.campaign_id)
        .where(row.subscriber_id == subscriber_id, campaigns.c.newsletter_id == newsletter_id)
    )
    if recipient_id is not None:
        query = query.where(row.id == recipient_id)
    else:
        query = query.where(row.state == "sent").order_by(row.campaign_id.desc()).limit(1)
    found = (await conn.execute(query)).scalar()
    if found is not None:
        await record_outcome(conn, found, kind="unsubscribe", at=at, code=None)


async def campaign_counts(conn: AsyncConnection, campaign_id: int) -> dict[str, dict[str, int]]:
    """Per segment (`excluded` for recipients never batched): sent, delivered, hard and soft
    bounced, complained and unsubscribed, counted from the recipient rows. The rows are
    counted per batch first (one pass, no join per row), then the batches summed per segment."""
    row = campaign_recipients.c
    per_batch = (
        select(
            row.batch_id,
            func.count().filter(row.state == "sent").label("sent"),
            func.count(row.delivered_at).label("delivered"),
            func.count().filter(row.bounce_kind == "hard").label("hard_bounced"),
            func.count().filter(row.bounce_kind == "soft").label("soft_bounced"),
            func.count(row.complained_at).label("complained"),
            func.count(row.unsubscribed_at).label("unsubscribed"),
        )
        .where(row.campaign_id == campaign_id)
        .group_by(row.batch_id)
        .subquery()
    )
    segment = func.coalesce(campaign_batches.c.segment, literal("excluded"))
    query = (
        select(
            segment.label("segment"),
            *(func.sum(per_batch.c[name]).label(name) for name in OUTCOME_COUNTS),
        )
        .select_from(
            per_batch.outerjoin(campaign_batches, campaign_batches.c.id == per_batch.c.batch_id)
        )
        .group_by(segment)
        .order_by(segment)
    )
    return {
        str(r.segment): {name: int(getattr(r, name) or 0) for name in OUTCOME_COUNTS}
        for r in await conn.execute(query)
    }


async def summaries(conn: AsyncConnection, campaign_ids: list[int]) -> dict[int, dict[str, int]]:
    """Sent, delivered, bounced (hard or soft) and complained per campaign, for a list page."""
    if not campaign_ids:
        return {}
    row = campaign_recipients.c
    query = (
        select(
            row.campaign_id,
            func.count().filter(row.state == "sent").label("sent"),
            func.count(row.delivered_at).label("delivered"),
            func.count(row.bounce_kind).label("bounced"),
            func.count(row.complained_at).label("complained"),
        )
        .where(row.campaign_id.in_(campaign_ids))
        .group_by(row.campaign_id)
    )
    return {
        int(r.campaign_id): {
            key: int(value or 0) for key, value in r._mapping.items() if key != "campaign_id"
        }
        for r in await conn.execute(query)
    }


async def campaign_hourly(
    conn: AsyncConnection, campaign_id: int
) -> list[tuple[datetime, str, int]]:
    """(hour, kind, events) of the campaign's applied events, oldest hour first, counted in
    SQL, for the chart."""
    hour = hour_of(inbound_events.c.occurred_at)
    query = (
        select(hour.label("hour"), inbound_events.c.kind, func.count().label("events"))
        .where(
            inbound_events.c.campaign_id == campaign_id,
            inbound_events.c.status == "applied",
            inbound_events.c.occurred_at.is_not(None),
        )
        .group_by(hour, inbound_events.c.kind)
        .order_by(hour, inbound_events.c.kind)
    )
    return [(r.hour, str(r.kind), int(r.events)) for r in await conn.execute(query)]
