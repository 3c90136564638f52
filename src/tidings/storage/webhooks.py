"""Named queries for webhook endpoints and their deliveries (DLV-5)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.tables import webhook_deliveries, webhook_endpoints


@dataclass(frozen=True, slots=True)
class EndpointRow:
    id: int
    url: str
    description: str
    event_types: list[str]
    enabled: bool
    disabled_reason: str | None
    secret: str
    previous_secret: str | None
    previous_secret_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime

    def subscribes_to(self, event_type: str) -> bool:
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


async def insert_delivery(conn: AsyncConnection, **values: Any) -> DeliveryRow:
    result = await conn.execute(
        insert(webhook_deliveries).values(**values).returning(webhook_deliveries)
    )
    return _delivery(result.one())


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
