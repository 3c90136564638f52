"""Named queries for the audit log: append an entry, list entries newest first by filter."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.tables import audit_log


@dataclass(frozen=True, slots=True)
class AuditRow:
    id: int
    occurred_at: datetime
    actor: str
    action: str
    target: str | None
    client_ip: str | None
    detail: dict[str, Any] | None


async def insert_entry(
    conn: AsyncConnection,
    *,
    now: datetime,
    actor: str,
    action: str,
    target: str | None,
    client_ip: str | None,
    detail: dict[str, Any] | None,
) -> None:
    await conn.execute(
        insert(audit_log).values(
            occurred_at=now,
            actor=actor,
            action=action,
            target=target,
            client_ip=client_ip,
            detail=detail,
        )
    )


async def list_entries(
    conn: AsyncConnection,
    *,
    action: str | None = None,
    actor: str | None = None,
    since: datetime | None = None,
    before_id: int | None = None,
    limit: int = 100,
) -> list[AuditRow]:
    """Newest first. `action` matches a prefix (`admin.` finds every operator change)."""
    query = select(audit_log).order_by(audit_log.c.id.desc()).limit(limit)
    if action:
        query = query.where(audit_log.c.action.startswith(action, autoescape=True))
    if actor:
        query = query.where(audit_log.c.actor == actor)
    if since is not None:
        query = query.where(audit_log.c.occurred_at >= since)
    if before_id is not None:
        query = query.where(audit_log.c.id < before_id)
    return [AuditRow(**row._mapping) for row in await conn.execute(query)]
