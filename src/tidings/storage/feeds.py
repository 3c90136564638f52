"""Named queries for feed-to-email (AUT-2): a newsletter's feed, the feeds due to be read, and
the items digests took (one row per newsletter and item, by a unique key: the never-twice
guarantee lives in that index, not in a check made before writing)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.dialect import insert_for
from tidings.storage.tables import feed_items, newsletter_feeds


@dataclass(frozen=True, slots=True)
class FeedRow:
    newsletter_id: int
    url: str
    schedule: str
    mode: str
    followed_at: datetime
    etag: str | None
    last_modified: str | None
    next_run_at: datetime
    last_run_at: datetime | None
    last_success_at: datetime | None
    last_error: str | None
    failures: int
    last_campaign_id: int | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class NewItem:
    key_hash: str
    item_key: str
    title: str
    link: str | None


@dataclass(frozen=True, slots=True)
class TakenItem:
    title: str
    link: str | None
    campaign_id: int | None
    recorded_at: datetime


def _feed(row: Any) -> FeedRow:
    return FeedRow(**row._mapping)


async def get(conn: AsyncConnection, newsletter_id: int) -> FeedRow | None:
    query = select(newsletter_feeds).where(newsletter_feeds.c.newsletter_id == newsletter_id)
    row = (await conn.execute(query)).first()
    return None if row is None else _feed(row)


async def insert(conn: AsyncConnection, **values: Any) -> FeedRow:
    statement = insert_for(conn, newsletter_feeds).values(**values).returning(newsletter_feeds)
    return _feed((await conn.execute(statement)).one())


async def change(
    conn: AsyncConnection, newsletter_id: int, *, due_at: datetime | None = None, **values: Any
) -> FeedRow | None:
    """Set `values`; with `due_at`, only while the feed is still due then (a read that was
    superseded, by a new schedule or a run by hand, changes nothing). None when unchanged."""
    statement = update(newsletter_feeds).where(newsletter_feeds.c.newsletter_id == newsletter_id)
    if due_at is not None:
        statement = statement.where(newsletter_feeds.c.next_run_at == due_at)
    row = (await conn.execute(statement.values(**values).returning(newsletter_feeds))).first()
    return None if row is None else _feed(row)


async def remove(conn: AsyncConnection, newsletter_id: int) -> bool:
    statement = delete(newsletter_feeds).where(newsletter_feeds.c.newsletter_id == newsletter_id)
    return (await conn.execute(statement)).rowcount > 0


async def due(conn: AsyncConnection, now: datetime, *, limit: int) -> list[tuple[int, datetime]]:
    """(newsletter id, due time) of the feeds due by `now`, earliest first."""
    query = (
        select(newsletter_feeds.c.newsletter_id, newsletter_feeds.c.next_run_at)
        .where(newsletter_feeds.c.next_run_at <= now)
        .order_by(newsletter_feeds.c.next_run_at)
        .limit(limit)
    )
    return [(int(newsletter_id), due_at) for newsletter_id, due_at in await conn.execute(query)]


async def known_keys(
    conn: AsyncConnection, newsletter_id: int, key_hashes: Sequence[str]
) -> set[str]:
    """Which of `key_hashes` a digest of this newsletter already took."""
    if not key_hashes:
        return set()
    query = select(feed_items.c.key_hash).where(
        feed_items.c.newsletter_id == newsletter_id, feed_items.c.key_hash.in_(key_hashes)
    )
    return set((await conn.scalars(query)).all())


async def take_items(
    conn: AsyncConnection, newsletter_id: int, items: Sequence[NewItem], *, now: datetime
) -> set[str]:
    """Record `items` as taken; returns the key hashes this call recorded. An item another
    transaction took first is skipped by the unique key (on PostgreSQL after waiting for it
    to commit), so two racing digests never share an item."""
    if not items:
        return set()
    statement = (
        insert_for(conn, feed_items)
        .values(
            [
                {
                    "newsletter_id": newsletter_id,
                    "key_hash": item.key_hash,
                    "item_key": item.item_key,
                    "title": item.title,
                    "link": item.link,
                    "recorded_at": now,
                }
                for item in items
            ]
        )
        .on_conflict_do_nothing(index_elements=["newsletter_id", "key_hash"])
        .returning(feed_items.c.key_hash)
    )
    return set((await conn.scalars(statement)).all())


async def assign_campaign(
    conn: AsyncConnection, newsletter_id: int, key_hashes: Sequence[str], campaign_id: int
) -> int:
    statement = (
        update(feed_items)
        .where(feed_items.c.newsletter_id == newsletter_id, feed_items.c.key_hash.in_(key_hashes))
        .values(campaign_id=campaign_id)
    )
    return (await conn.execute(statement)).rowcount


async def recent_items(conn: AsyncConnection, newsletter_id: int, *, limit: int) -> list[TakenItem]:
    """The items digests took most recently, newest first."""
    query = (
        select(
            feed_items.c.title,
            feed_items.c.link,
            feed_items.c.campaign_id,
            feed_items.c.recorded_at,
        )
        .where(feed_items.c.newsletter_id == newsletter_id)
        .order_by(feed_items.c.id.desc())
        .limit(limit)
    )
    return [TakenItem(*row) for row in await conn.execute(query)]


async def feed_of_campaign(conn: AsyncConnection, campaign_id: int) -> int | None:
    """The newsletter whose feed made digest `campaign_id`, if it still follows one."""
    query = (
        select(newsletter_feeds.c.newsletter_id)
        .join(feed_items, feed_items.c.newsletter_id == newsletter_feeds.c.newsletter_id)
        .where(feed_items.c.campaign_id == campaign_id)
        .limit(1)
    )
    found = (await conn.execute(query)).scalar()
    return None if found is None else int(found)
