"""Named queries for locally captured mail (the `capture` provider, PRV-3)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.tables import captured_messages


@dataclass(frozen=True, slots=True)
class CapturedMessage:
    id: int
    message_id: str
    sender: str
    recipients: list[str]
    subject: str
    raw: bytes
    captured_at: datetime

    @property
    def size_bytes(self) -> int:
        return len(self.raw)


async def insert_captured(
    conn: AsyncConnection,
    *,
    message_id: str,
    sender: str,
    recipients: list[str],
    subject: str,
    raw: bytes,
    now: datetime,
) -> int:
    result = await conn.execute(
        insert(captured_messages)
        .values(
            message_id=message_id,
            sender=sender,
            recipients=recipients,
            subject=subject,
            raw=raw,
            captured_at=now,
        )
        .returning(captured_messages.c.id)
    )
    return int(result.scalar_one())


async def list_captured(
    conn: AsyncConnection, *, before_id: int | None, limit: int
) -> list[CapturedMessage]:
    query = select(captured_messages).order_by(captured_messages.c.id.desc()).limit(limit)
    if before_id is not None:
        query = query.where(captured_messages.c.id < before_id)
    return [CapturedMessage(**dict(row._mapping)) for row in await conn.execute(query)]


async def get_captured(conn: AsyncConnection, message_id: int) -> CapturedMessage | None:
    query = select(captured_messages).where(captured_messages.c.id == message_id)
    row = (await conn.execute(query)).first()
    return None if row is None else CapturedMessage(**dict(row._mapping))


async def prune_captured(conn: AsyncConnection, *, before: datetime, batch: int) -> int:
    old = (
        select(captured_messages.c.id).where(captured_messages.c.captured_at < before).limit(batch)
    )
    result = await conn.execute(delete(captured_messages).where(captured_messages.c.id.in_(old)))
    return int(result.rowcount)
