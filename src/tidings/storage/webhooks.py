"""Named queries for webhook endpoints and their deliveries (DLV-5)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Select,
    String,
    Text,
    bindparam,
    cast,
    column,
    delete,
    func,
    insert,
    literal,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import Insert

from tidings.domain.webhook_events import WEBHOOK_KEY_PREFIX
from tidings.storage.dialect import UTCDateTime, is_postgresql
from tidings.storage.tables import webhook_deliveries, webhook_endpoints


@dataclass(frozen=True, slots=True)
class EndpointRow:
    id: int
    url: str
    description: str
    event_types: list[str]
    enabled: bool
    disabled_reason: str | None
    include_imports: bool
    secret: str
    previous_secret: str | None
    previous_secret_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime

    def subscribes_to(self, event_type: str, *, from_import: bool = False) -> bool:
        """Whether this endpoint wants `event_type`; `from_import` when a CSV import caused it."""
        if from_import and not self.include_imports:
            return False
        return "*" in self.event_types or event_type in self.event_types


@dataclass(frozen=True, slots=True)
class DeliveryRow:
    id: int
    endpoint_id: int
    event_id: str
    event_type: str
    payload: dict[str, Any]
    status: str
    attempts: int
    last_status_code: int | None
    last_error: str | None
    response_excerpt: str | None
    created_at: datetime
    updated_at: datetime
    delivered_at: datetime | None


def _endpoint(row: Any) -> EndpointRow:
    return EndpointRow(**dict(row._mapping))


def _delivery(row: Any) -> DeliveryRow:
    return DeliveryRow(**dict(row._mapping))


async def insert_endpoint(conn: AsyncConnection, **values: Any) -> EndpointRow:
    result = await conn.execute(
        insert(webhook_endpoints).values(**values).returning(webhook_endpoints)
    )
    return _endpoint(result.one())


async def get_endpoint(conn: AsyncConnection, endpoint_id: int) -> EndpointRow | None:
    query = select(webhook_endpoints).where(webhook_endpoints.c.id == endpoint_id)
    row = (await conn.execute(query)).first()
    return None if row is None else _endpoint(row)


async def list_endpoints(
    conn: AsyncConnection, *, after_id: int | None = None, limit: int = 1000
) -> list[EndpointRow]:
    query = select(webhook_endpoints).order_by(webhook_endpoints.c.id).limit(limit)
    if after_id is not None:
        query = query.where(webhook_endpoints.c.id > after_id)
    return [_endpoint(row) for row in await conn.execute(query)]


async def enabled_endpoints(conn: AsyncConnection) -> list[EndpointRow]:
    query = select(webhook_endpoints).where(webhook_endpoints.c.enabled.is_(True))
    return [_endpoint(row) for row in await conn.execute(query)]


async def update_endpoint(
    conn: AsyncConnection, endpoint_id: int, **values: Any
) -> EndpointRow | None:
    result = await conn.execute(
        update(webhook_endpoints)
        .where(webhook_endpoints.c.id == endpoint_id)
        .values(**values)
        .returning(webhook_endpoints)
    )
    row = result.first()
    return None if row is None else _endpoint(row)


async def delete_endpoint(conn: AsyncConnection, endpoint_id: int) -> bool:
    query = delete(webhook_endpoints).where(webhook_endpoints.c.id == endpoint_id)
    return (await conn.execute(query)).rowcount == 1


@dataclass(frozen=True, slots=True)
class NewEvent:
    """One event to deliver: its id (the `webhook-id`), type and JSON body."""

    event_id: str
    event_type: str
    payload: dict[str, Any]


def _events_table(conn: AsyncConnection, events: Sequence[NewEvent]) -> Any:
    """`events` as a table (event_id, event_type, payload) inside the statement, travelling as
    one JSON parameter however many there are: SQLite's `json_each`, PostgreSQL's
    `jsonb_to_recordset`."""
    rows = json.dumps(
        [
            {"event_id": e.event_id, "event_type": e.event_type, "payload": e.payload}
            for e in events
        ],
        separators=(",", ":"),
    )
    if is_postgresql(conn):
        recordset = func.jsonb_to_recordset(cast(bindparam("events", rows, type_=Text), JSONB))
        return recordset.table_valued(
            column("event_id", Text), column("event_type", Text), column("payload", JSONB)
        ).render_derived(name="events", with_types=True)
    value = func.json_each(bindparam("events", rows, type_=Text)).table_valued("value").c.value
    return select(
        func.json_extract(value, "$.event_id").label("event_id"),
        func.json_extract(value, "$.event_type").label("event_type"),
        func.json_extract(value, "$.payload").label("payload"),
    ).subquery("events")


async def deliveries_to_enqueue(
    conn: AsyncConnection, events: Sequence[NewEvent], endpoint_ids: Sequence[int], *, now: datetime
) -> Select[Any]:
    """A pending delivery of every event to every one of `endpoint_ids`, and the select of
    their jobs' idempotency keys and payload field (`delivery_id`) for
    `JobQueue.enqueue_many`, which the caller must run in the same transaction.

    An import publishes a thousand events per chunk, so this is set-based. On PostgreSQL the
    deliveries' INSERT rides inside the returned select (a data-modifying CTE whose RETURNING
    feeds the jobs): one statement writes both, nothing is read back. SQLite has no such
    CTE: the deliveries are inserted here and the select finds them by event id."""
    source = _events_table(conn, events)
    rows = (
        select(
            webhook_endpoints.c.id,
            source.c.event_id,
            source.c.event_type,
            source.c.payload,
            literal("pending"),
            literal(now, UTCDateTime()),
            literal(now, UTCDateTime()),
        )
        .select_from(source.join(webhook_endpoints, true()))
        .where(webhook_endpoints.c.id.in_(list(endpoint_ids)))
    )
    columns = ["endpoint_id", "event_id", "event_type", "payload", "status", "created_at"]
    write = insert(webhook_deliveries).from_select([*columns, "updated_at"], rows)
    if is_postgresql(conn):
        written, query = _deliveries_to_enqueue_postgresql(write)
    else:
        written, query = await _deliveries_to_enqueue_sqlite(conn, write, events)
    key = (
        literal(WEBHOOK_KEY_PREFIX, String)  # webhook_delivery_key, in SQL
        + written.c.event_id
        + literal(":", String)
        + cast(written.c.endpoint_id, String)
    )
    return query.with_only_columns(
        key.label("idempotency_key"),
        written.c.id.label("delivery_id"),
        written.c.event_id.label("event_id"),
    )


def _deliveries_to_enqueue_postgresql(write: Insert) -> tuple[Any, Select[Any]]:
    """PostgreSQL: the deliveries' INSERT rides inside the select, as a data-modifying CTE."""
    written = write.returning(
        webhook_deliveries.c.id,
        webhook_deliveries.c.event_id,
        webhook_deliveries.c.endpoint_id,
    ).cte("written")
    return written, select(written)


async def _deliveries_to_enqueue_sqlite(
    conn: AsyncConnection, write: Insert, events: Sequence[NewEvent]
) -> tuple[Any, Select[Any]]:
    """SQLite: the deliveries inserted now, the select finding them by event id."""
    await conn.execute(write)
    written = webhook_deliveries
    return written, select(written).where(written.c.event_id.in_([e.event_id for e in events]))


async def get_delivery_of(
    conn: AsyncConnection, event_id: str, endpoint_id: int
) -> DeliveryRow | None:
    query = select(webhook_deliveries).where(
        webhook_deliveries.c.event_id == event_id, webhook_deliveries.c.endpoint_id == endpoint_id
    )
    row = (await conn.execute(query)).first()
    return None if row is None else _delivery(row)


async def get_delivery(conn: AsyncConnection, delivery_id: int) -> DeliveryRow | None:
    query = select(webhook_deliveries).where(webhook_deliveries.c.id == delivery_id)
    row = (await conn.execute(query)).first()
    return None if row is None else _delivery(row)


async def list_deliveries(
    conn: AsyncConnection, endpoint_id: int, *, before_id: int | None, limit: int
) -> list[DeliveryRow]:
    query = (
        select(webhook_deliveries)
        .where(webhook_deliveries.c.endpoint_id == endpoint_id)
        .order_by(webhook_deliveries.c.id.desc())
        .limit(limit)
    )
    if before_id is not None:
        query = query.where(webhook_deliveries.c.id < before_id)
    return [_delivery(row) for row in await conn.execute(query)]


async def record_attempt(
    conn: AsyncConnection,
    delivery_id: int,
    *,
    status: str,
    status_code: int | None,
    error: str | None,
    response_excerpt: str | None,
    now: datetime,
) -> None:
    values: dict[str, Any] = {
        "status": status,
        "attempts": webhook_deliveries.c.attempts + 1,
        "last_status_code": status_code,
        "last_error": error,
        "response_excerpt": response_excerpt,
        "updated_at": now,
    }
    if status == "delivered":
        values["delivered_at"] = now
    await conn.execute(
        update(webhook_deliveries).where(webhook_deliveries.c.id == delivery_id).values(**values)
    )


async def reset_delivery(conn: AsyncConnection, delivery_id: int, *, now: datetime) -> None:
    await conn.execute(
        update(webhook_deliveries)
        .where(webhook_deliveries.c.id == delivery_id)
        .values(status="pending", updated_at=now)
    )


async def prune_deliveries(conn: AsyncConnection, *, before: datetime, batch: int) -> int:
    """Finished deliveries older than `before` (pending ones stay until they finish)."""
    old = (
        select(webhook_deliveries.c.id)
        .where(webhook_deliveries.c.updated_at < before, webhook_deliveries.c.status != "pending")
        .limit(batch)
    )
    result = await conn.execute(delete(webhook_deliveries).where(webhook_deliveries.c.id.in_(old)))
    return int(result.rowcount)
