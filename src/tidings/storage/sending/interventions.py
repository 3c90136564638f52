"""Named queries for the send interventions audit (SND-13, SND-19, SND-23): one row per retry,
reconcile, resend, pause, resume or cancel, with who, when, why and how many recipients it
moved; and the sends paused now by one actor (a provider that refused the sender, SND-26)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.sending import CampaignStatus
from tidings.storage.tables import campaigns, send_interventions


@dataclass(frozen=True, slots=True)
class InterventionRow:
    id: int
    campaign_id: int
    action: str
    batch_id: int | None
    outcome: str | None
    recipient_count: int
    attempt: int | None
    note: str | None
    actor: str
    created_at: datetime


async def record(
    conn: AsyncConnection,
    campaign_id: int,
    *,
    action: str,
    actor: str,
    now: datetime,
    recipient_count: int,
    batch_id: int | None = None,
    outcome: str | None = None,
    attempt: int | None = None,
    note: str | None = None,
) -> None:
    await conn.execute(
        insert(send_interventions).values(
            campaign_id=campaign_id,
            action=action,
            batch_id=batch_id,
            outcome=outcome,
            recipient_count=recipient_count,
            attempt=attempt,
            note=note,
            actor=actor[:100],
            created_at=now,
        )
    )


async def list_for(conn: AsyncConnection, campaign_id: int) -> list[InterventionRow]:
    query = (
        select(send_interventions)
        .where(send_interventions.c.campaign_id == campaign_id)
        .order_by(send_interventions.c.id)
    )
    return [InterventionRow(**dict(row._mapping)) for row in await conn.execute(query)]


async def paused_by(
    conn: AsyncConnection, actor: str, campaign_ids: list[int] | None = None
) -> list[tuple[int, datetime, str]]:
    """(campaign, when, why) of every campaign paused now by `actor` — its latest
    intervention a pause by it — oldest first; only those of `campaign_ids` when given."""
    later = send_interventions.alias("later")
    latest = (
        select(func.max(later.c.id))
        .where(later.c.campaign_id == campaigns.c.id)
        .correlate(campaigns)
        .scalar_subquery()
    )
    query = (
        select(campaigns.c.id, send_interventions.c.created_at, send_interventions.c.note)
        .select_from(campaigns)
        .join(send_interventions, send_interventions.c.id == latest)
        .where(
            campaigns.c.status == CampaignStatus.PAUSED.value,
            send_interventions.c.action == "pause",
            send_interventions.c.actor == actor,
        )
        .order_by(send_interventions.c.created_at)
    )
    if campaign_ids is not None:
        query = query.where(campaigns.c.id.in_(campaign_ids))
    return [(int(row.id), row.created_at, str(row.note or "")) for row in await conn.execute(query)]
