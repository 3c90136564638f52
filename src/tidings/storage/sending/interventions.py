"""Named queries for the send interventions audit (SND-13, SND-19): one row per retry,
reconcile or resend, with who, when, why and how many recipients it moved."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.tables import send_interventions


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
