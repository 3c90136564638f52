"""Named queries for campaigns (CMP-1)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.tables import campaign_sends, campaigns


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
    archive_public: bool


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


async def set_archive_public(
    conn: AsyncConnection, campaign_id: int, public: bool, *, updated_at: datetime
) -> CampaignRow | None:
    """Put a campaign in its newsletter's archive or take it out, in any state (API-4)."""
    result = await conn.execute(
        update(campaigns)
        .where(campaigns.c.id == campaign_id)
        .values(archive_public=public, updated_at=updated_at)
        .returning(campaigns)
    )
    row = result.first()
    return None if row is None else _row(row)


async def delete_draft(conn: AsyncConnection, campaign_id: int) -> bool:
    result = await conn.execute(
        delete(campaigns).where(campaigns.c.id == campaign_id, campaigns.c.status == "draft")
    )
    return result.rowcount == 1


@dataclass(frozen=True, slots=True)
class SentIssue:
    """A campaign that went out and is public, for the archive (API-4): what, and when."""

    campaign: CampaignRow
    sent_at: datetime


def _sent(newsletter_id: int) -> Select[Any]:
    sent_at = func.coalesce(campaign_sends.c.finished_at, campaign_sends.c.attempt_started_at)
    return (
        select(campaigns, sent_at.label("sent_at"))
        .join(campaign_sends, campaign_sends.c.campaign_id == campaigns.c.id)
        .where(
            campaigns.c.newsletter_id == newsletter_id,
            campaigns.c.status == "submitted",
            campaigns.c.archive_public.is_(True),
        )
    )


def _sent_issue(row: Any) -> SentIssue:
    values = dict(row._mapping)
    sent_at = values.pop("sent_at")
    return SentIssue(campaign=CampaignRow(**values), sent_at=sent_at)


async def sent_issues(conn: AsyncConnection, newsletter_id: int, *, limit: int) -> list[SentIssue]:
    """The newsletter's sent campaigns, newest first."""
    query = _sent(newsletter_id).order_by(campaigns.c.id.desc()).limit(limit)
    return [_sent_issue(row) for row in await conn.execute(query)]


async def sent_issue(
    conn: AsyncConnection, newsletter_id: int, campaign_id: int
) -> SentIssue | None:
    row = (await conn.execute(_sent(newsletter_id).where(campaigns.c.id == campaign_id))).first()
    return None if row is None else _sent_issue(row)
