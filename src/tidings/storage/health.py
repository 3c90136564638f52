"""The database round trip behind readiness."""

from __future__ import annotations

from sqlalchemy import select

from tidings.storage.database import Database


async def ping(db: Database) -> None:
    async with db.read() as conn:
        await conn.execute(select(1))
