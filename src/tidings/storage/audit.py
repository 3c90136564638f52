"""Named queries for the audit log: append an entry, fold a repeat into its entry, list entries
newest first by filter, delete the old ones."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, true, update
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
    occurrences: int = 1
    last_occurred_at: datetime | None = None


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


async def fold_entry(
    conn: AsyncConnection,
    *,
    now: datetime,
    since: datetime,
    actor: str,
    action: str,
    target: str | None,
    client_ip: str | None,
    detail: dict[str, Any] | None,
    same_actor: bool = False,
    most_targets: int | None = None,
    overflow_target: str = "",
) -> None:
    """Count one more `action` on `target` in its entry since `since` (this `actor`'s entry
    only, with `same_actor`), or begin that entry. With `most_targets`, past that many entries
    of the action since then every further target shares the entry of `overflow_target`:
    however many targets a flood names, the rows stay bounded."""
    by = actor if same_actor else None
    if await _count_repeat(conn, now=now, since=since, action=action, target=target, actor=by):
        return
    if most_targets is not None:
        entries = await conn.execute(
            select(func.count())
            .select_from(audit_log)
            .where((audit_log.c.action == action) & (audit_log.c.occurred_at >= since))
        )
        if int(entries.scalar_one()) >= most_targets:
            target, detail = overflow_target, None
            if await _count_repeat(
                conn, now=now, since=since, action=action, target=target, actor=by
            ):
                return
    await insert_entry(
        conn,
        now=now,
        actor=actor,
        action=action,
        target=target,
        client_ip=client_ip,
        detail=detail,
    )


async def _count_repeat(
    conn: AsyncConnection,
    *,
    now: datetime,
    since: datetime,
    action: str,
    target: str | None,
    actor: str | None = None,
) -> bool:
    earlier = audit_log.alias("earlier")
    same_actor = true() if actor is None else earlier.c.actor == actor
    entry = (
        select(earlier.c.id)
        .where(
            (earlier.c.action == action)
            & (earlier.c.target == target)
            & (earlier.c.occurred_at >= since)
            & same_actor
        )
        .order_by(earlier.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    result = await conn.execute(
        update(audit_log)
        .where(audit_log.c.id == entry)
        .values(occurrences=audit_log.c.occurrences + 1, last_occurred_at=now)
    )
    return int(result.rowcount) == 1


async def delete_before(conn: AsyncConnection, *, before: datetime) -> int:
    """Entries whose last occurrence is older than `before`."""
    last = func.coalesce(audit_log.c.last_occurred_at, audit_log.c.occurred_at)
    result = await conn.execute(delete(audit_log).where(last < before))
    return int(result.rowcount)
