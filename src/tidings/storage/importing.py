"""Bulk named queries for CSV import and export (AUD-9): statements per chunk, not per row.

Each function takes a whole chunk (about 1,000 rows), so importing 100,000 rows is a few
hundred statements. The upserts only ever add or fill in: a blank in the file never clears a
stored value.

A chunk travels as one array per column on PostgreSQL (`storage/bulk.py`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    func,
    select,
    text,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.consent import SubscriptionState, state_of
from tidings.storage.bulk import among, insert_rows
from tidings.storage.dialect import is_postgresql
from tidings.storage.subscribers import has_label, state_clause
from tidings.storage.tables import (
    labels,
    newsletters,
    subscriber_labels,
    subscribers,
    subscriptions,
    suppressions,
)


@dataclass(frozen=True, slots=True)
class StoredSubscriber:
    """The columns an import compares against: what it may change, and the id."""

    id: int
    email: str
    name: str | None
    tier: str
    attributes: dict[str, Any]
    tracking_consent: bool = False  # consent to per-person tracking is on record (ENG-1)


@dataclass(frozen=True, slots=True)
class StoredSubscription:
    id: int
    confirmed: bool
    unsubscribed: bool

    @property
    def state(self) -> SubscriptionState:
        return state_of(confirmed=self.confirmed, unsubscribed=self.unsubscribed)


async def subscribers_by_key(
    conn: AsyncConnection, email_keys: Collection[str]
) -> dict[str, StoredSubscriber]:
    """The subscribers that already exist among `email_keys`."""
    if not email_keys:
        return {}
    query = select(
        subscribers.c.email_key,
        subscribers.c.id,
        subscribers.c.email,
        subscribers.c.name,
        subscribers.c.tier,
        subscribers.c.attributes,
        subscribers.c.tracking_consent_at.is_not(None),
    ).where(among(conn, subscribers.c.email_key, email_keys))
    return {
        key: StoredSubscriber(subscriber_id, email, name, tier, attributes, bool(consented))
        for key, subscriber_id, email, name, tier, attributes, consented in await conn.execute(
            query
        )
    }


async def set_tracking_consent(
    conn: AsyncConnection, *, given: Sequence[int], withdrawn: Sequence[int], now: datetime
) -> None:
    """Record consent to per-person tracking asserted by an import (source `import`, the
    import's time) for `given`, and clear it for `withdrawn`. Consent already on record
    keeps its first time and source."""
    if given:
        await conn.execute(
            update(subscribers)
            .where(subscribers.c.id.in_(given), subscribers.c.tracking_consent_at.is_(None))
            .values(tracking_consent_at=now, tracking_consent_source="import")
        )
    if withdrawn:
        await conn.execute(
            update(subscribers)
            .where(subscribers.c.id.in_(withdrawn))
            .values(tracking_consent_at=None, tracking_consent_source=None)
        )


async def suppressed_hashes(conn: AsyncConnection, email_hashes: Collection[str]) -> set[str]:
    """Which of `email_hashes` are on the suppression list (AUD-8)."""
    if not email_hashes:
        return set()
    query = select(suppressions.c.email_hash).where(
        among(conn, suppressions.c.email_hash, email_hashes)
    )
    return set((await conn.execute(query)).scalars())


async def subscriptions_of(
    conn: AsyncConnection, subscriber_ids: Collection[int]
) -> dict[tuple[int, int], StoredSubscription]:
    """Every subscription of these subscribers, keyed by (subscriber id, newsletter id)."""
    if not subscriber_ids:
        return {}
    query = select(
        subscriptions.c.subscriber_id,
        subscriptions.c.newsletter_id,
        subscriptions.c.id,
        subscriptions.c.confirmed_at.is_not(None),
        subscriptions.c.unsubscribed_at.is_not(None),
    ).where(among(conn, subscriptions.c.subscriber_id, subscriber_ids))
    return {
        (subscriber_id, newsletter_id): StoredSubscription(
            subscription_id, bool(confirmed), bool(unsubscribed)
        )
        for subscriber_id, newsletter_id, subscription_id, confirmed, unsubscribed in (
            await conn.execute(query)
        )
    }


async def labels_of(conn: AsyncConnection, subscriber_ids: Collection[int]) -> dict[int, set[str]]:
    """The labels these subscribers have (only those with any)."""
    if not subscriber_ids:
        return {}
    query = (
        select(subscriber_labels.c.subscriber_id, labels.c.name)
        .join(labels, labels.c.id == subscriber_labels.c.label_id)
        .where(among(conn, subscriber_labels.c.subscriber_id, subscriber_ids))
    )
    found: dict[int, set[str]] = {}
    for subscriber_id, name in await conn.execute(query):
        found.setdefault(subscriber_id, set()).add(name)
    return found


async def upsert_subscribers(
    conn: AsyncConnection, rows: Sequence[dict[str, Any]], *, update_tier: bool, now: datetime
) -> tuple[dict[str, int], set[str]]:
    """Insert subscribers (`email`, `email_key`, `email_hash`, `name`, `tier`, `attributes`:
    the whole merged object), or update the existing ones with the same `email_key`; returns
    the id of every row written, by `email_key`, and the keys of those this statement created
    (the update never touches `created_at`, so a row whose `created_at` is `now` is new). A
    `None` name keeps the stored name. `tier` is written only when `update_tier` (callers
    split rows by whether the file gave a tier): the column is NOT NULL, so "not given"
    cannot travel as a null through ON CONFLICT."""
    if not rows:
        return {}, set()

    def upsert(statement: Any) -> Any:
        changes: dict[str, Any] = {
            "name": func.coalesce(statement.excluded.name, subscribers.c.name),
            "attributes": statement.excluded.attributes,
            "updated_at": statement.excluded.updated_at,
        }
        if update_tier:
            changes["tier"] = statement.excluded.tier
        return statement.on_conflict_do_update(
            index_elements=["email_key"], set_=changes
        ).returning(subscribers.c.email_key, subscribers.c.id, subscribers.c.created_at)

    result = await insert_rows(
        conn,
        subscribers,
        rows,
        constants={"created_at": now, "updated_at": now},
        finish=upsert,
    )
    ids, created = {}, set()
    for row in result:
        ids[row.email_key] = row.id
        if row.created_at == now:
            created.add(row.email_key)
    return ids, created


async def refresh_statistics(conn: AsyncConnection) -> None:
    """Let PostgreSQL's planner see tables a bulk import has grown. With stale statistics it
    answers a 1,000-key lookup with a sequential scan, which turns a 100,000-row import
    into minutes. Without ownership, PostgreSQL skips the tables with a warning. SQLite's
    planner uses the indexes regardless, so there is nothing to do."""
    if is_postgresql(conn):
        await conn.execute(text("ANALYZE subscribers, subscriptions, subscriber_labels"))


async def add_labels(
    conn: AsyncConnection, labels_by_subscriber: dict[int, Iterable[str]], *, now: datetime
) -> None:
    """Give subscribers these labels in addition to the ones they have (creating labels as
    needed). Never removes a label: taking labels away is an explicit admin edit."""
    pairs = {
        (subscriber_id, name)
        for subscriber_id, names in labels_by_subscriber.items()
        for name in names
    }
    if not pairs:
        return
    names = sorted({name for _, name in pairs})
    await insert_rows(
        conn,
        labels,
        [{"name": name} for name in names],
        constants={"created_at": now},
        finish=lambda statement: statement.on_conflict_do_nothing(index_elements=["name"]),
    )
    query = select(labels.c.name, labels.c.id).where(among(conn, labels.c.name, names))
    label_ids: dict[str, int] = {row.name: row.id for row in await conn.execute(query)}
    await insert_rows(
        conn,
        subscriber_labels,
        [
            {"subscriber_id": subscriber_id, "label_id": label_ids[name]}
            for subscriber_id, name in sorted(pairs)
        ],
        constants={},
        finish=lambda statement: statement.on_conflict_do_nothing(
            index_elements=["subscriber_id", "label_id"]
        ),
    )


async def insert_subscriptions(
    conn: AsyncConnection,
    rows: Sequence[dict[str, Any]],
    *,
    state: str,
    source: str,
    evidence: str,
    now: datetime,
) -> list[tuple[int, int]]:
    """Create subscriptions (`subscriber_id`, `newsletter_id`, `created_at`) in one state:
    `pending`; `confirmed` now, on `evidence`; or `unsubscribed` now, with the history the
    CHECK requires. One that appeared meanwhile (a concurrent form subscribe) is left as it
    is. Returns the (subscriber id, newsletter id) pairs it created."""
    if not rows:
        return []
    constants: dict[str, Any] = {"source": source, "updated_at": now}
    if state == "confirmed":
        constants |= {"confirmed_at": now, "consent_evidence": evidence}
    elif state == "unsubscribed":
        constants |= {"unsubscribed_at": now, "unsubscribe_count": 1, "last_unsubscribed_at": now}
    result = await insert_rows(
        conn,
        subscriptions,
        rows,
        constants=constants,
        finish=lambda statement: statement.on_conflict_do_nothing(
            index_elements=["subscriber_id", "newsletter_id"]
        ).returning(subscriptions.c.subscriber_id, subscriptions.c.newsletter_id),
    )
    return [(row.subscriber_id, row.newsletter_id) for row in result]


async def confirm_subscriptions(
    conn: AsyncConnection, subscription_ids: Collection[int], *, evidence: str, now: datetime
) -> list[tuple[int, int]]:
    """Record asserted consent on pending subscriptions. The guard re-checks "pending" in
    the statement, so an unsubscribe that landed meanwhile is never overridden. Returns the
    (subscriber id, newsletter id) pairs it confirmed."""
    if not subscription_ids:
        return []
    result = await conn.execute(
        update(subscriptions)
        .where(
            among(conn, subscriptions.c.id, subscription_ids),
            subscriptions.c.confirmed_at.is_(None),
            subscriptions.c.unsubscribed_at.is_(None),
        )
        .values(confirmed_at=now, consent_evidence=evidence, updated_at=now)
        .returning(subscriptions.c.subscriber_id, subscriptions.c.newsletter_id)
    )
    return [(row[0], row[1]) for row in result]


async def unsubscribe_subscriptions(
    conn: AsyncConnection, subscription_ids: Collection[int], *, now: datetime
) -> list[tuple[int, int]]:
    """Unsubscribe with history (AUD-7); already unsubscribed rows are left alone. Returns the
    (subscriber id, newsletter id) pairs it unsubscribed."""
    if not subscription_ids:
        return []
    result = await conn.execute(
        update(subscriptions)
        .where(
            among(conn, subscriptions.c.id, subscription_ids),
            subscriptions.c.unsubscribed_at.is_(None),
        )
        .values(
            unsubscribed_at=now,
            unsubscribe_count=subscriptions.c.unsubscribe_count + 1,
            last_unsubscribed_at=now,
            updated_at=now,
        )
        .returning(subscriptions.c.subscriber_id, subscriptions.c.newsletter_id)
    )
    return [(row[0], row[1]) for row in result]


# -- export -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExportFilter:
    newsletter_id: int | None = None
    state: str | None = None  # pending | confirmed | unsubscribed
    tier: str | None = None
    label: str | None = None


@dataclass(frozen=True, slots=True)
class ExportRow:
    subscription_id: int
    subscriber_id: int
    email: str
    name: str | None
    tier: str
    newsletter: str
    created_at: datetime
    confirmed_at: datetime | None
    unsubscribed_at: datetime | None
    attributes: dict[str, Any]
    tracking_consent: bool = False  # consent to per-person tracking on record (ENG-1)


async def export_page(
    conn: AsyncConnection, audience: ExportFilter, *, after_id: int | None, limit: int
) -> list[ExportRow]:
    """One page of subscriptions in the audience, in id order (keyset pagination)."""
    query = (
        select(
            subscriptions.c.id.label("subscription_id"),
            subscriptions.c.subscriber_id,
            subscribers.c.email,
            subscribers.c.name,
            subscribers.c.tier,
            newsletters.c.slug.label("newsletter"),
            subscriptions.c.created_at,
            subscriptions.c.confirmed_at,
            subscriptions.c.unsubscribed_at,
            subscribers.c.attributes,
            subscribers.c.tracking_consent_at.is_not(None).label("tracking_consent"),
        )
        .select_from(
            subscriptions.join(subscribers, subscribers.c.id == subscriptions.c.subscriber_id).join(
                newsletters, newsletters.c.id == subscriptions.c.newsletter_id
            )
        )
        .order_by(subscriptions.c.id)
        .limit(limit)
    )
    if after_id is not None:
        query = query.where(subscriptions.c.id > after_id)
    if audience.newsletter_id is not None:
        query = query.where(subscriptions.c.newsletter_id == audience.newsletter_id)
    if audience.state is not None:
        query = query.where(state_clause(audience.state))
    if audience.tier is not None:
        query = query.where(subscribers.c.tier == audience.tier)
    if audience.label is not None:
        query = query.where(has_label(audience.label))
    return [
        ExportRow(**{**row._mapping, "tracking_consent": bool(row.tracking_consent)})
        for row in await conn.execute(query)
    ]
