"""Named queries for admin API keys."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.tables import api_keys


@dataclass(frozen=True, slots=True)
class ApiKeyRow:
    id: str
    name: str
    secret_hash: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    role: str
    parent_id: str | None


def _row(mapping: object) -> ApiKeyRow:
    return ApiKeyRow(**dict(mapping))  # type: ignore[call-overload]


async def insert_key(
    conn: AsyncConnection,
    *,
    key_id: str,
    name: str,
    secret_hash: str,
    role: str,
    parent_id: str | None,
    now: datetime,
) -> None:
    await conn.execute(
        insert(api_keys).values(
            id=key_id,
            name=name,
            secret_hash=secret_hash,
            role=role,
            parent_id=parent_id,
            created_at=now,
        )
    )


async def get_key(conn: AsyncConnection, key_id: str) -> ApiKeyRow | None:
    found = (await conn.execute(select(api_keys).where(api_keys.c.id == key_id))).mappings().first()
    return None if found is None else _row(found)


async def list_keys(conn: AsyncConnection, *, after_id: str | None, limit: int) -> list[ApiKeyRow]:
    query = select(api_keys).order_by(api_keys.c.id).limit(limit)
    if after_id is not None:
        query = query.where(api_keys.c.id > after_id)
    return [_row(found) for found in (await conn.execute(query)).mappings()]


async def revoke_key(conn: AsyncConnection, key_id: str, *, now: datetime) -> int:
    """Revoke the key and every key minted from it, at any depth (a leaked key's children
    must not outlive it); returns how many were live until now."""
    family = [key_id]
    frontier = [key_id]
    while frontier:
        children = await conn.execute(
            select(api_keys.c.id).where(api_keys.c.parent_id.in_(frontier))
        )
        frontier = [child for child in children.scalars() if child not in family]
        family += frontier
    result = await conn.execute(
        update(api_keys)
        .where(api_keys.c.id.in_(family), api_keys.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    return int(result.rowcount)


async def touch_key(
    conn: AsyncConnection, key_id: str, *, now: datetime, resolution: timedelta
) -> None:
    """Record a use, at most once per `resolution`, so busy keys don't write on every request."""
    await conn.execute(
        update(api_keys)
        .where(
            api_keys.c.id == key_id,
            (api_keys.c.last_used_at.is_(None)) | (api_keys.c.last_used_at < now - resolution),
        )
        .values(last_used_at=now)
    )
