"""Named queries for what providers and mailboxes report back (PRV-6, AUD-13): received
events (the dedupe and replay guard), the per-address bounce record and the person's history.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.feedback import AddressRecord
from tidings.storage.bulk import among
from tidings.storage.dialect import insert_for, is_postgresql
from tidings.storage.tables import address_feedback, address_history, inbound_events

Recorded = Literal["new", "duplicate", "replayed"]


@dataclass(frozen=True, slots=True)
class InboundEventRow:
    id: int
    source: str
    event_key: str
    kind: str | None
    status: str
    campaign_id: int | None
    occurred_at: datetime | None
    code: str | None
    diagnostic: str | None
    payload: str | None
    received_at: datetime
    reviewed: str | None
    reviewed_at: datetime | None
    reviewed_by: str | None


async def record_event(conn: AsyncConnection, **values: Any) -> Recorded:
    """Insert one received event. `duplicate`: this source already sent this event id (a
    retry: nothing to do); `replayed`: its signature token was already used by another event
    (a replay: refuse)."""
    inserted = await conn.execute(
        insert_for(conn, inbound_events)
        .values(**values)
        .on_conflict_do_nothing()
        .returning(inbound_events.c.id)
    )
    if inserted.first() is not None:
        return "new"
    same = select(inbound_events.c.id).where(
        inbound_events.c.source == values["source"],
        inbound_events.c.event_key == values["event_key"],
    )
    return "duplicate" if (await conn.execute(same)).first() is not None else "replayed"


async def hashes_with_records(conn: AsyncConnection, email_hashes: Iterable[str]) -> set[str]:
    """Which of these addresses have a bounce record (a delivery may change their verdict)."""
    wanted = list(set(email_hashes))
    if not wanted:
        return set()
    column = address_feedback.c.email_hash
    query = select(column).where(among(conn, column, wanted))
    return set((await conn.execute(query)).scalars())


async def list_events(
    conn: AsyncConnection,
    *,
    status: str | None,
    after_id: int | None,
    limit: int,
    awaiting_review: bool = False,
) -> list[InboundEventRow]:
    """Received events, newest first (the operator's view of what came in); with
    `awaiting_review`, only the unverified ones nobody has applied or discarded."""
    columns = [inbound_events.c[name] for name in InboundEventRow.__dataclass_fields__]
    query = select(*columns).order_by(inbound_events.c.id.desc()).limit(limit)
    if awaiting_review:
        query = query.where(
            inbound_events.c.status == "unverified", inbound_events.c.reviewed.is_(None)
        )
    if status is not None:
        query = query.where(inbound_events.c.status == status)
    if after_id is not None:
        query = query.where(inbound_events.c.id < after_id)
    return [InboundEventRow(**dict(row._mapping)) for row in await conn.execute(query)]


async def mark_reviewed(
    conn: AsyncConnection, event_id: int, *, decision: str, actor: str, now: datetime
) -> InboundEventRow | None:
    """Record the operator's decision on an unverified event not yet reviewed, and return it;
    None when there is no such event waiting (unknown, not unverified, or already reviewed).
    The condition is in the UPDATE, so two operators cannot both apply one report."""
    result = await conn.execute(
        update(inbound_events)
        .where(inbound_events.c.id == event_id)
        .where(inbound_events.c.status == "unverified")
        .where(inbound_events.c.reviewed.is_(None))
        .values(reviewed=decision, reviewed_at=now, reviewed_by=actor[:100])
        .returning(*[inbound_events.c[name] for name in InboundEventRow.__dataclass_fields__])
    )
    row = result.first()
    return None if row is None else InboundEventRow(**dict(row._mapping))


async def purge_events(conn: AsyncConnection, *, before: datetime) -> int:
    result = await conn.execute(delete(inbound_events).where(inbound_events.c.received_at < before))
    return int(result.rowcount or 0)


# -- the per-address record ---------------------------------------------------------------


async def touch_delivered(conn: AsyncConnection, email_hash: str, at: datetime) -> bool:
    """Move an existing record's latest delivery forward; False when the address has no
    record (nothing to clear: the common case, answered without a read)."""
    column = address_feedback.c.last_delivered_at
    result = await conn.execute(
        update(address_feedback)
        .where(address_feedback.c.email_hash == email_hash)
        .where(or_(column.is_(None), column < at))
        .values(last_delivered_at=at)
    )
    if result.rowcount:
        return True
    exists = select(address_feedback.c.email_hash).where(
        address_feedback.c.email_hash == email_hash
    )
    return (await conn.execute(exists)).first() is not None


async def load_record(conn: AsyncConnection, email_hash: str) -> AddressRecord:
    """The address's record, locked for the rest of the transaction on PostgreSQL (two events
    for one address must not both read the old record); SQLite has one writer anyway."""
    query = select(address_feedback).where(address_feedback.c.email_hash == email_hash)
    if is_postgresql(conn):
        query = query.with_for_update()
    row = (await conn.execute(query)).first()
    if row is None:
        return AddressRecord()
    bounces = tuple(sorted((datetime.fromisoformat(at), key) for at, key in row.soft_bounces or []))
    return AddressRecord(
        soft_bounces=bounces,
        last_delivered_at=row.last_delivered_at,
        hard_bounced_at=row.hard_bounced_at,
        complained_at=row.complained_at,
    ).pruned()


async def save_record(
    conn: AsyncConnection, email_hash: str, record: AddressRecord, *, now: datetime
) -> None:
    values = {
        "soft_bounces": [[at.isoformat(), key] for at, key in record.soft_bounces],
        "last_delivered_at": record.last_delivered_at,
        "hard_bounced_at": record.hard_bounced_at,
        "complained_at": record.complained_at,
        "updated_at": now,
    }
    statement = insert_for(conn, address_feedback).values(email_hash=email_hash, **values)
    await conn.execute(statement.on_conflict_do_update(index_elements=["email_hash"], set_=values))


# -- the person's history -----------------------------------------------------------------


async def add_history(conn: AsyncConnection, **values: Any) -> None:
    await conn.execute(address_history.insert().values(**values))


async def history_of(conn: AsyncConnection, email_hash: str) -> list[dict[str, Any]]:
    query = (
        select(address_history)
        .where(address_history.c.email_hash == email_hash)
        .order_by(address_history.c.id)
    )
    return [dict(row._mapping) for row in await conn.execute(query)]


async def erase_address(conn: AsyncConnection, email_hash: str) -> None:
    """A privacy delete (AUD-10): the history, the record and the received events about the
    address go; only the suppression's keyed hash stays."""
    for table in (address_history, address_feedback, inbound_events):
        await conn.execute(delete(table).where(table.c.email_hash == email_hash))


def hashed_tables() -> Sequence[tuple[Any, Any]]:
    """The tables here that store an address hash, with a key column: re-keyed with the rest."""
    return (
        (address_history, address_history.c.id),
        (address_feedback, address_feedback.c.email_hash),
        (inbound_events, inbound_events.c.id),
    )
