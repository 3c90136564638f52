"""Named queries for a campaign's send: the campaign status transitions, the send row with its
attempt, counts and error, and the status lock (SND-1, SND-2, SND-14, SND-15)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.sending import CampaignStatus
from tidings.storage.dialect import insert_for
from tidings.storage.sending.batch_claims import claim_is_live
from tidings.storage.tables import campaign_sends, campaigns


@dataclass(frozen=True, slots=True)
class SendRow:
    campaign_id: int
    attempt: int
    attempt_started_at: datetime
    preflight_email_count: int
    lock_token: str | None
    candidate_count: int | None
    preparation_excluded_count: int | None
    prepared_at: datetime | None
    email_count: int | None
    excluded_count: int | None
    failed_count: int | None
    uncertain_count: int | None
    cancelled_count: int | None
    finished_at: datetime | None
    failed_during: str | None
    error_code: str | None
    error: str | None
    retryable: bool | None
    created_at: datetime
    updated_at: datetime
    tracking: str | None = None  # the mode frozen at `prepared_at` (ENG-1); None before 0034


async def set_status(
    conn: AsyncConnection,
    campaign_id: int,
    *,
    from_statuses: Sequence[CampaignStatus],
    to_status: CampaignStatus,
    now: datetime,
    scheduled_at: datetime | None = None,
    keep_schedule: bool = False,
) -> bool:
    """The conditional state change every lifecycle step is made of: True if it happened."""
    values: dict[str, Any] = {"status": to_status.value, "updated_at": now}
    if not keep_schedule:
        values["scheduled_at"] = scheduled_at
    result = await conn.execute(
        update(campaigns)
        .where(
            campaigns.c.id == campaign_id,
            campaigns.c.status.in_([status.value for status in from_statuses]),
        )
        .values(**values)
    )
    return result.rowcount == 1


async def status(conn: AsyncConnection, campaign_id: int) -> str | None:
    query = select(campaigns.c.status).where(campaigns.c.id == campaign_id)
    return (await conn.execute(query)).scalar_one_or_none()


async def start_attempt(
    conn: AsyncConnection, campaign_id: int, *, preflight_email_count: int, now: datetime
) -> SendRow:
    """Create the send row (attempt 1) with the preflight count, or start the next attempt."""
    statement = insert_for(conn, campaign_sends).values(
        campaign_id=campaign_id,
        attempt=1,
        attempt_started_at=now,
        preflight_email_count=preflight_email_count,
        created_at=now,
        updated_at=now,
    )
    await conn.execute(
        statement.on_conflict_do_update(
            index_elements=["campaign_id"],
            set_={
                "attempt": campaign_sends.c.attempt + 1,
                "attempt_started_at": now,
                "finished_at": None,
                "failed_during": None,
                "error_code": None,
                "error": None,
                "retryable": None,
                "updated_at": now,
            },
        )
    )
    row = await get(conn, campaign_id)
    assert row is not None
    return row


async def get(conn: AsyncConnection, campaign_id: int) -> SendRow | None:
    query = select(campaign_sends).where(campaign_sends.c.campaign_id == campaign_id)
    row = (await conn.execute(query)).first()
    return None if row is None else SendRow(**dict(row._mapping))


async def for_campaigns(conn: AsyncConnection, campaign_ids: Sequence[int]) -> dict[int, SendRow]:
    """The send rows of these campaigns (those ever sent or scheduled), by campaign id."""
    if not campaign_ids:
        return {}
    query = select(campaign_sends).where(campaign_sends.c.campaign_id.in_(list(campaign_ids)))
    return {
        int(row.campaign_id): SendRow(**dict(row._mapping)) for row in await conn.execute(query)
    }


async def take_lock(conn: AsyncConnection, campaign_id: int, *, token: str, now: datetime) -> bool:
    """Take the status lock for a job's claim token: free when unheld, or held by a token no
    running job holds under a live lease (its worker died or finished)."""
    result = await conn.execute(
        update(campaign_sends)
        .where(
            campaign_sends.c.campaign_id == campaign_id,
            or_(
                campaign_sends.c.lock_token.is_(None),
                campaign_sends.c.lock_token == token,
                ~claim_is_live(campaign_sends.c.lock_token),
            ),
        )
        .values(lock_token=token, updated_at=now)
    )
    return result.rowcount == 1


async def release_lock(conn: AsyncConnection, campaign_id: int, *, token: str) -> None:
    await conn.execute(
        update(campaign_sends)
        .where(campaign_sends.c.campaign_id == campaign_id, campaign_sends.c.lock_token == token)
        .values(lock_token=None)
    )


async def sent_tracking(conn: AsyncConnection, campaign_id: int) -> str | None:
    """The tracking mode the campaign's send was prepared under, or None (not prepared, or
    prepared before the mode was recorded)."""
    query = select(campaign_sends.c.tracking).where(campaign_sends.c.campaign_id == campaign_id)
    return (await conn.execute(query)).scalar()


async def update_send(conn: AsyncConnection, campaign_id: int, **values: Any) -> None:
    await conn.execute(
        update(campaign_sends).where(campaign_sends.c.campaign_id == campaign_id).values(**values)
    )


@dataclass(frozen=True, slots=True)
class ActiveSend:
    """A campaign whose send is under way (`pending` or `submitting`), for recovery."""

    campaign_id: int
    status: str
    attempt: int
    attempt_started_at: datetime
    scheduled_at: datetime | None
    prepared_at: datetime | None


async def active(conn: AsyncConnection) -> list[ActiveSend]:
    """Every campaign whose send is under way, oldest first (a handful at any time)."""
    query = (
        select(
            campaigns.c.id,
            campaigns.c.status,
            campaign_sends.c.attempt,
            campaign_sends.c.attempt_started_at,
            campaigns.c.scheduled_at,
            campaign_sends.c.prepared_at,
        )
        .join(campaign_sends, campaign_sends.c.campaign_id == campaigns.c.id)
        .where(
            campaigns.c.status.in_([CampaignStatus.PENDING.value, CampaignStatus.SUBMITTING.value])
        )
        .order_by(campaigns.c.id)
    )
    return [ActiveSend(*row) for row in await conn.execute(query)]
