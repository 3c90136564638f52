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
    query = select(site_secrets.c.value).where(site_secrets.c.name == name)
    existing = (await conn.execute(query)).scalar_one_or_none()
    if existing is not None:
        return str(existing)
    try:
        async with conn.begin_nested():
            await conn.execute(
                insert(site_secrets).values(name=name, value=candidate, created_at=now)
            )
    except IntegrityError:  # another process stored one first: use theirs
        return str((await conn.execute(query)).scalar_one())
    return candidate
