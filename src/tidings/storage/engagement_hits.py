"""Named queries for hits (ENG-3): appended to the intake in group commits, then applied to
firsts, counters, consented people's hits and engaged notices in set-based statements."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.bulk import insert_rows
from tidings.storage.dialect import insert_for
from tidings.storage.tables import (
    campaign_links,
    campaign_recipients,
    campaigns,
    engagement_counters,
    engagement_firsts,
    engagement_intake,
    engagement_notices,
    engagement_person_hits,
    newsletters,
    subscribers,
)

CHUNK = 1000  # rows per statement: well under SQLite's 32,766 bound parameters
FirstKey = tuple[int, str, int, str, str]  # campaign, segment, number, kind, message key
CounterKey = tuple[int, str, int, str, datetime]  # campaign, segment, number, kind, hour


@dataclass(slots=True)
class IntakeRow:
    """One hit as taken in (the intake table's columns)."""

    id: int
    received_at: datetime
    campaign_id: int
    segment: str
    number: int
    kind: str
    message_key: str
    recipient_id: int | None
    verdict: str
    reason: str
    client_family: str


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


async def append_hits(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    """Write hits to the intake in one statement per chunk (on PostgreSQL the same text for
    any row count: one array per column; measured at a third of executemany's CPU)."""
    for chunk in _chunks(rows):
        await insert_rows(conn, engagement_intake, chunk)


_INTAKE_COLUMNS = (
    engagement_intake.c.id,
    engagement_intake.c.received_at,
    engagement_intake.c.campaign_id,
    engagement_intake.c.segment,
    engagement_intake.c.number,
    engagement_intake.c.kind,
    engagement_intake.c.message_key,
    engagement_intake.c.recipient_id,
    engagement_intake.c.verdict,
    engagement_intake.c.reason,
    engagement_intake.c.client_family,
)


async def claim_intake(conn: AsyncConnection, before: datetime, limit: int) -> list[IntakeRow]:
    """Up to `limit` hits received by `before`, oldest first, locked for this transaction;
    rows another applier holds are skipped (PostgreSQL), SQLite has one writer anyway."""
    query = (
        select(*_INTAKE_COLUMNS)
        .where(engagement_intake.c.received_at <= before)
        .order_by(engagement_intake.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return [IntakeRow(*row) for row in await conn.execute(query)]


async def clicks_of_messages(conn: AsyncConnection, message_keys: Sequence[str]) -> list[IntakeRow]:
    """Every click in the intake of these messages, claimed or not (for bursts)."""
    found: list[IntakeRow] = []
    for chunk in _chunks(sorted(set(message_keys))):
        query = select(*_INTAKE_COLUMNS).where(
            engagement_intake.c.kind == "click", engagement_intake.c.message_key.in_(chunk)
        )
        found += [IntakeRow(*row) for row in await conn.execute(query)]
    return found


async def mark_machine(conn: AsyncConnection, ids: Sequence[int], reason: str) -> None:
    """Mark intake rows as a machine's, skipping rows another applier holds (it marks them)."""
    for chunk in _chunks(sorted(ids)):
        free = select(engagement_intake.c.id).where(engagement_intake.c.id.in_(chunk))
        held = [row.id for row in await conn.execute(free.with_for_update(skip_locked=True))]
        if held:
            await conn.execute(
                update(engagement_intake)
                .where(engagement_intake.c.id.in_(held))
                .values(verdict="machine", reason=reason)
            )


async def delete_intake(conn: AsyncConnection, ids: Sequence[int]) -> None:
    for chunk in _chunks(ids):
        await conn.execute(delete(engagement_intake).where(engagement_intake.c.id.in_(chunk)))


async def existing_campaigns(conn: AsyncConnection, campaign_ids: Iterable[int]) -> set[int]:
    ids = sorted(set(campaign_ids))
    query = select(campaigns.c.id).where(campaigns.c.id.in_(ids))
    return {row.id for row in await conn.execute(query)}


async def link_counts(
    conn: AsyncConnection, segments: Iterable[tuple[int, str]]
) -> dict[tuple[int, str], int]:
    """Links a person can click per (campaign, segment): not the pixel, not the hidden one."""
    wanted = set(segments)
    query = (
        select(campaign_links.c.campaign_id, campaign_links.c.segment, func.count())
        .where(
            campaign_links.c.campaign_id.in_(sorted({c for c, _ in wanted})),
            campaign_links.c.number > 0,
            campaign_links.c.hidden.is_(False),
        )
        .group_by(campaign_links.c.campaign_id, campaign_links.c.segment)
    )
    rows = await conn.execute(query)
    return {(r[0], r[1]): r[2] for r in rows if (r[0], r[1]) in wanted}


async def insert_firsts(conn: AsyncConnection, keys: Sequence[FirstKey]) -> set[FirstKey]:
    """Record first human hits; the ones not recorded before (what unique counts count)."""
    new: set[FirstKey] = set()
    columns = ("campaign_id", "segment", "number", "kind", "message_key")
    for chunk in _chunks(keys):
        statement = (
            insert_for(conn, engagement_firsts)
            .values([dict(zip(columns, key, strict=True)) for key in chunk])
            .on_conflict_do_nothing()
            .returning(*(engagement_firsts.c[name] for name in columns))
        )
        new.update(tuple(row) for row in await conn.execute(statement))
    return new


async def add_to_counters(conn: AsyncConnection, counts: dict[CounterKey, list[int]]) -> None:
    """Add (human_unique, human_total, machine_total) to each counter, creating it if new."""
    items = sorted(counts.items())
    for chunk in _chunks(items):
        statement = insert_for(conn, engagement_counters).values(
            [
                {
                    "campaign_id": key[0],
                    "segment": key[1],
                    "number": key[2],
                    "kind": key[3],
                    "hour": key[4],
                    "human_unique": unique,
                    "human_total": human,
                    "machine_total": machine,
                }
                for key, (unique, human, machine) in chunk
            ]
        )
        table, added = engagement_counters.c, statement.excluded
        await conn.execute(
            statement.on_conflict_do_update(
                index_elements=["campaign_id", "segment", "number", "kind", "hour"],
                set_={
                    "human_unique": table.human_unique + added.human_unique,
                    "human_total": table.human_total + added.human_total,
                    "machine_total": table.machine_total + added.machine_total,
                },
            )
        )


async def consented_recipients(
    conn: AsyncConnection, recipient_ids: Iterable[int]
) -> dict[int, tuple[int, int]]:
    """recipient id -> (campaign, subscriber) for recipients whose subscriber still exists,
    has tracking consent recorded, and whose campaign's newsletter tracks per person."""
    ids = sorted(set(recipient_ids))
    found: dict[int, tuple[int, int]] = {}
    for chunk in _chunks(ids):
        query = (
            select(
                campaign_recipients.c.id,
                campaign_recipients.c.campaign_id,
                campaign_recipients.c.subscriber_id,
            )
            .join(subscribers, subscribers.c.id == campaign_recipients.c.subscriber_id)
            .join(campaigns, campaigns.c.id == campaign_recipients.c.campaign_id)
            .join(newsletters, newsletters.c.id == campaigns.c.newsletter_id)
            .where(
                campaign_recipients.c.id.in_(chunk),
                subscribers.c.tracking_consent_at.is_not(None),
                newsletters.c.tracking == "per_person",
            )
        )
        found.update(
            {row.id: (row.campaign_id, row.subscriber_id) for row in await conn.execute(query)}
        )
    return found


async def add_person_hits(conn: AsyncConnection, hits: Sequence[dict[str, Any]]) -> None:
    for chunk in _chunks(hits):
        await conn.execute(engagement_person_hits.insert(), list(chunk))


async def insert_notices(
    conn: AsyncConnection, pairs: Sequence[tuple[int, int]], now: datetime
) -> list[tuple[int, int]]:
    """Record that (campaign, subscriber) engaged; the pairs not recorded before."""
    new: list[tuple[int, int]] = []
    for chunk in _chunks(sorted(set(pairs))):
        statement = (
            insert_for(conn, engagement_notices)
            .values([{"campaign_id": c, "subscriber_id": s, "at": now} for c, s in chunk])
            .on_conflict_do_nothing()
            .returning(engagement_notices.c.campaign_id, engagement_notices.c.subscriber_id)
        )
        new += [(row.campaign_id, row.subscriber_id) for row in await conn.execute(statement)]
    return new


async def subscriber_emails(conn: AsyncConnection, ids: Iterable[int]) -> dict[int, str]:
    query = select(subscribers.c.id, subscribers.c.email).where(
        subscribers.c.id.in_(sorted(set(ids)))
    )
    return {row.id: row.email for row in await conn.execute(query)}
