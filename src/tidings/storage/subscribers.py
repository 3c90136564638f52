"""Named queries for subscribers, their labels, and admin search (AUD-2, AUD-11)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    and_,
    delete,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.bulk import among
from tidings.storage.dialect import attribute_text, insert_for
from tidings.storage.tables import labels, subscriber_labels, subscribers, subscriptions


@dataclass(frozen=True, slots=True)
class SubscriberRow:
    id: int
    email: str
    email_key: str
    email_hash: str
    name: str | None
    tier: str
    attributes: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    # Consent to per-person open and click tracking (ENG-1): when and how, or None.
    tracking_consent_at: datetime | None = None
    tracking_consent_source: str | None = None


@dataclass(frozen=True, slots=True)
class SearchFilter:
    newsletter_id: int | None = None
    state: str | None = None  # pending | confirmed | unsubscribed
    tier: str | None = None
    label: str | None = None
    text: str | None = None


def _row(row: Any) -> SubscriberRow:
    return SubscriberRow(**dict(row._mapping))


async def get_by_key(conn: AsyncConnection, email_key: str) -> SubscriberRow | None:
    query = select(subscribers).where(subscribers.c.email_key == email_key)
    row = (await conn.execute(query)).first()
    return None if row is None else _row(row)


async def by_keys(conn: AsyncConnection, email_keys: Iterable[str]) -> dict[str, SubscriberRow]:
    """The subscribers with these addresses (lower-cased keys), by key, in one query."""
    wanted = list(set(email_keys))
    if not wanted:
        return {}
    query = select(subscribers).where(among(conn, subscribers.c.email_key, wanted))
    return {row.email_key: _row(row) for row in await conn.execute(query)}


async def get(conn: AsyncConnection, subscriber_id: int) -> SubscriberRow | None:
    row = (await conn.execute(select(subscribers).where(subscribers.c.id == subscriber_id))).first()
    return None if row is None else _row(row)


async def insert_if_absent(conn: AsyncConnection, **values: Any) -> tuple[SubscriberRow, bool]:
    """Insert a subscriber unless the address exists; (row, created)."""
    statement = insert_for(conn, subscribers).values(**values)
    result = await conn.execute(
        statement.on_conflict_do_nothing(index_elements=["email_key"]).returning(subscribers)
    )
    row = result.first()
    if row is not None:
        return _row(row), True
    existing = await get_by_key(conn, values["email_key"])
    assert existing is not None
    return existing, False


async def ensure(conn: AsyncConnection, **values: Any) -> tuple[int, bool]:
    """The id of the subscriber with this address, inserted if absent; (id, created). The
    same two statements whether or not the address exists (AUD-5: no timing difference)."""
    inserted = await conn.execute(
        insert_for(conn, subscribers)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["email_key"])
        .returning(subscribers.c.id)
    )
    created = inserted.first() is not None
    query = select(subscribers.c.id).where(subscribers.c.email_key == values["email_key"])
    return int((await conn.execute(query)).scalar_one()), created


async def update_subscriber(
    conn: AsyncConnection, subscriber_id: int, **values: Any
) -> SubscriberRow | None:
    result = await conn.execute(
        update(subscribers)
        .where(subscribers.c.id == subscriber_id)
        .values(**values)
        .returning(subscribers)
    )
    row = result.first()
    return None if row is None else _row(row)


async def delete_subscriber(conn: AsyncConnection, subscriber_id: int) -> bool:
    result = await conn.execute(delete(subscribers).where(subscribers.c.id == subscriber_id))
    return result.rowcount == 1


async def set_labels(
    conn: AsyncConnection, subscriber_id: int, names: Sequence[str], *, now: datetime
) -> None:
    """Replace the subscriber's labels with `names` (creating labels as needed)."""
    await conn.execute(
        delete(subscriber_labels).where(subscriber_labels.c.subscriber_id == subscriber_id)
    )
    if not names:
        return
    await conn.execute(
        insert_for(conn, labels)
        .values([{"name": name, "created_at": now} for name in names])
        .on_conflict_do_nothing(index_elements=["name"])
    )
    label_ids = (
        await conn.execute(select(labels.c.id).where(labels.c.name.in_(list(names))))
    ).scalars()
    await conn.execute(
        insert(subscriber_labels),
        [{"subscriber_id": subscriber_id, "label_id": label_id} for label_id in label_ids],
    )


async def labels_of(conn: AsyncConnection, subscriber_ids: Iterable[int]) -> dict[int, list[str]]:
    ids = list(subscriber_ids)
    found: dict[int, list[str]] = {subscriber_id: [] for subscriber_id in ids}
    if not ids:
        return found
    query = (
        select(subscriber_labels.c.subscriber_id, labels.c.name)
        .join(labels, labels.c.id == subscriber_labels.c.label_id)
        .where(subscriber_labels.c.subscriber_id.in_(ids))
        .order_by(labels.c.name)
    )
    for subscriber_id, name in await conn.execute(query):
        found[subscriber_id].append(name)
    return found


def state_clause(state: str) -> Any:
    """Subscriptions in `state` (pending, confirmed, unsubscribed)."""
    if state == "unsubscribed":
        return subscriptions.c.unsubscribed_at.is_not(None)
    if state == "pending":
        return and_(
            subscriptions.c.unsubscribed_at.is_(None), subscriptions.c.confirmed_at.is_(None)
        )
    return and_(
        subscriptions.c.unsubscribed_at.is_(None), subscriptions.c.confirmed_at.is_not(None)
    )


def has_label(label: str) -> Any:
    """The subscriber (of the enclosing query) carries `label`."""
    return exists(
        select(subscriber_labels.c.label_id)
        .join(labels, labels.c.id == subscriber_labels.c.label_id)
        .where(subscriber_labels.c.subscriber_id == subscribers.c.id, labels.c.name == label)
    )


def attribute_equals(key: str, value: str) -> Any:
    """The subscriber's attribute `key` reads `value` (AUD-12's `attr:KEY=VALUE`). Keys are
    letters, digits, `_`, `.` and `-` (the filter grammar), so the quoted JSON path is safe."""
    return attribute_text(subscribers.c.attributes, literal(key), literal(f'$."{key}"')) == value


def _filtered(search: SearchFilter) -> Any:
    query = select(subscribers)
    if search.newsletter_id is not None or search.state is not None:
        conditions = [subscriptions.c.subscriber_id == subscribers.c.id]
        if search.newsletter_id is not None:
            conditions.append(subscriptions.c.newsletter_id == search.newsletter_id)
        if search.state is not None:
            conditions.append(state_clause(search.state))
        query = query.where(exists(select(subscriptions.c.id).where(*conditions)))
    if search.tier is not None:
        query = query.where(subscribers.c.tier == search.tier)
    if search.label is not None:
        query = query.where(has_label(search.label))
    if search.text:
        pattern = (
            "%"
            + search.text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            + "%"
        )
        query = query.where(
            or_(
                subscribers.c.email_key.like(pattern, escape="\\"),
                func.lower(subscribers.c.name).like(pattern, escape="\\"),
            )
        )
    return query


async def search(
    conn: AsyncConnection, search: SearchFilter, *, after_id: int | None, limit: int
) -> list[SubscriberRow]:
    query = _filtered(search).order_by(subscribers.c.id).limit(limit)
    if after_id is not None:
        query = query.where(subscribers.c.id > after_id)
    return [_row(row) for row in await conn.execute(query)]


async def count(conn: AsyncConnection, search: SearchFilter) -> int:
    """How many subscribers match `search` (the list's total)."""
    chosen = _filtered(search).with_only_columns(subscribers.c.id).subquery()
    return int((await conn.execute(select(func.count()).select_from(chosen))).scalar_one())


async def ids_page(
    conn: AsyncConnection,
    search: SearchFilter,
    *,
    among: Sequence[int] | None,
    after_id: int,
    limit: int,
) -> list[SubscriberRow]:
    """The next `limit` subscribers after `after_id` that match `search` (and are `among`
    the given ids, when given), by id: how a bulk action walks its selection."""
    query = _filtered(search).where(subscribers.c.id > after_id)
    if among is not None:
        query = query.where(subscribers.c.id.in_(list(among)))
    return [_row(row) for row in await conn.execute(query.order_by(subscribers.c.id).limit(limit))]


async def add_label(
    conn: AsyncConnection, subscriber_ids: Sequence[int], name: str, *, now: datetime
) -> list[int]:
    """Give these subscribers the label; returns those that did not have it."""
    await conn.execute(
        insert_for(conn, labels)
        .values(name=name, created_at=now)
        .on_conflict_do_nothing(index_elements=["name"])
    )
    label_id = (await conn.execute(select(labels.c.id).where(labels.c.name == name))).scalar_one()
    had = set(
        (
            await conn.execute(
                select(subscriber_labels.c.subscriber_id).where(
                    subscriber_labels.c.label_id == label_id,
                    subscriber_labels.c.subscriber_id.in_(list(subscriber_ids)),
                )
            )
        ).scalars()
    )
    missing = [subscriber_id for subscriber_id in subscriber_ids if subscriber_id not in had]
    if missing:
        await conn.execute(
            insert(subscriber_labels),
            [{"subscriber_id": subscriber_id, "label_id": label_id} for subscriber_id in missing],
        )
    return missing


async def remove_label(
    conn: AsyncConnection, subscriber_ids: Sequence[int], name: str
) -> list[int]:
    """Take the label from these subscribers; returns those that had it."""
    label_id = (
        await conn.execute(select(labels.c.id).where(labels.c.name == name))
    ).scalar_one_or_none()
    if label_id is None:
        return []
    held = subscriber_labels.c.subscriber_id.in_(list(subscriber_ids))
    had = list(
        (
            await conn.execute(
                select(subscriber_labels.c.subscriber_id).where(
                    subscriber_labels.c.label_id == label_id, held
                )
            )
        ).scalars()
    )
    await conn.execute(
        delete(subscriber_labels).where(subscriber_labels.c.label_id == label_id, held)
    )
    return had
