"""Named queries for campaigns (CMP-1)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.tables import campaigns


@dataclass(frozen=True, slots=True)
class CampaignRow:
    id: int
    newsletter_id: int
    status: str
    subject: str
    preheader: str
    body: str
    body_format: str
    audience_filter: str
    sender_name: str | None
    reply_to: str | None
    scheduled_at: datetime | None
    created_at: datetime
    updated_at: datetime


def _row(row: Any) -> CampaignRow:
    return CampaignRow(**dict(row._mapping))


async def insert_campaign(conn: AsyncConnection, **values: Any) -> CampaignRow:
    return _row((await conn.execute(insert(campaigns).values(**values).returning(campaigns))).one())


async def get(conn: AsyncConnection, campaign_id: int) -> CampaignRow | None:
    row = (await conn.execute(select(campaigns).where(campaigns.c.id == campaign_id))).first()
    return None if row is None else _row(row)


async def list_campaigns(
    conn: AsyncConnection, *, newsletter_id: int | None, before_id: int | None, limit: int
) -> list[CampaignRow]:
    query = select(campaigns).order_by(campaigns.c.id.desc()).limit(limit)
    if newsletter_id is not None:
        query = query.where(campaigns.c.newsletter_id == newsletter_id)
    if before_id is not None:
        query = query.where(campaigns.c.id < before_id)
    return [_row(row) for row in await conn.execute(query)]


async def update_draft(
    conn: AsyncConnection, campaign_id: int, **values: Any
) -> CampaignRow | None:
    """Change a campaign only while it is a draft; None when it is not (or is gone)."""
    result = await conn.execute(
        update(campaigns)
        .where(campaigns.c.id == campaign_id, campaigns.c.status == "draft")
        .values(**values)
        .returning(campaigns)
    )
    row = result.first()
    return None if row is None else _row(row)


async def delete_draft(conn: AsyncConnection, campaign_id: int) -> bool:
    result = await conn.execute(
        delete(campaigns).where(campaigns.c.id == campaign_id, campaigns.c.status == "draft")
    )
    return result.rowcount == 1
