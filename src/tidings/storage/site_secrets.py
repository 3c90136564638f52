"""Named queries for site secrets generated on first start and kept in the database."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.tables import site_secrets


async def get_or_create_secret(
    conn: AsyncConnection, name: str, *, candidate: str, now: datetime
) -> str:
    """The stored secret called `name`; `candidate` is stored first if there is none yet."""
    existing = await get_secret(conn, name)
    if existing is not None:
        return existing
    if await add_secret(conn, name, candidate, now=now):
        return candidate
    stored = await get_secret(conn, name)  # another process stored one first: use theirs
    assert stored is not None
    return stored


async def add_secret(conn: AsyncConnection, name: str, value: str, *, now: datetime) -> bool:
    """Store `value` under `name` unless one is there; False when another process stored one
    first (on PostgreSQL this waits for that process's transaction to end)."""
    try:
        async with conn.begin_nested():
            await conn.execute(insert(site_secrets).values(name=name, value=value, created_at=now))
    except IntegrityError:
        return False
    return True


async def get_secret(conn: AsyncConnection, name: str) -> str | None:
    query = select(site_secrets.c.value).where(site_secrets.c.name == name)
    value = (await conn.execute(query)).scalar_one_or_none()
    return None if value is None else str(value)
