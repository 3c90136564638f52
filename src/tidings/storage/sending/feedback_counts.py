"""Named queries for the auto-pause watch (SND-24): a campaign's hard bounces and complaints,
each recipient counted once, its messages handed over (summed from its batch rows: one row
per batch, never per recipient), and the baseline an operator's resume sets."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.auto_pause import FeedbackTally
from tidings.storage.dialect import insert_for
from tidings.storage.tables import campaign_batches, campaign_feedback_counts, campaigns

_counts = campaign_feedback_counts.c


@dataclass(frozen=True, slots=True)
class FeedbackWatch:
    """A campaign's figures now, those at the last resume after an auto-pause, and the
    auto-pause in force (None when the campaign has not paused itself since)."""

    now: FeedbackTally
    baseline: FeedbackTally
    auto_paused_at: datetime | None
    auto_pause_reason: str | None


async def count(
    conn: AsyncConnection, campaign_id: int, *, hard_bounced: int, complained: int
) -> None:
    """Add newly hard-bounced and complaining recipients to the campaign's counts."""
    statement = insert_for(conn, campaign_feedback_counts).values(
        campaign_id=campaign_id, hard_bounced=hard_bounced, complained=complained
    )
    statement = statement.on_conflict_do_update(
        index_elements=[_counts.campaign_id],
        set_={
            "hard_bounced": _counts.hard_bounced + hard_bounced,
            "complained": _counts.complained + complained,
        },
    )
    await conn.execute(statement)


async def sent(conn: AsyncConnection, campaign_id: int) -> int:
    """Messages handed over so far, from the finished batches' counts."""
    query = select(func.coalesce(func.sum(campaign_batches.c.submitted_count), 0)).where(
        campaign_batches.c.campaign_id == campaign_id
    )
    return int((await conn.execute(query)).scalar_one())


async def watch(conn: AsyncConnection, campaign_id: int) -> FeedbackWatch:
    row = (
        await conn.execute(
            select(campaign_feedback_counts).where(_counts.campaign_id == campaign_id)
        )
    ).first()
    handed_over = await sent(conn, campaign_id)
    if row is None:
        zero = FeedbackTally(0, 0, 0)
        return FeedbackWatch(FeedbackTally(handed_over, 0, 0), zero, None, None)
    return FeedbackWatch(
        now=FeedbackTally(handed_over, row.hard_bounced, row.complained),
        baseline=FeedbackTally(
            row.baseline_sent, row.baseline_hard_bounced, row.baseline_complained
        ),
        auto_paused_at=row.auto_paused_at,
        auto_pause_reason=row.auto_pause_reason,
    )


async def auto_paused(
    conn: AsyncConnection, campaign_ids: list[int]
) -> dict[int, tuple[datetime, str]]:
    """(when, why) of the auto-pause in force, for those of `campaign_ids` that have one."""
    if not campaign_ids:
        return {}
    query = select(_counts.campaign_id, _counts.auto_paused_at, _counts.auto_pause_reason).where(
        _counts.campaign_id.in_(campaign_ids), _counts.auto_paused_at.is_not(None)
    )
    return {
        int(row.campaign_id): (row.auto_paused_at, str(row.auto_pause_reason or ""))
        for row in await conn.execute(query)
    }


async def paused_by_policy(conn: AsyncConnection) -> list[tuple[int, tuple[datetime, str]]]:
    """Campaigns paused now by the auto-pause, with when and why, oldest first."""
    query = (
        select(_counts.campaign_id, _counts.auto_paused_at, _counts.auto_pause_reason)
        .join(campaigns, campaigns.c.id == _counts.campaign_id)
        .where(campaigns.c.status == "paused", _counts.auto_paused_at.is_not(None))
        .order_by(_counts.auto_paused_at)
    )
    return [
        (int(row.campaign_id), (row.auto_paused_at, str(row.auto_pause_reason or "")))
        for row in await conn.execute(query)
    ]


async def mark_auto_paused(
    conn: AsyncConnection, campaign_id: int, *, reason: str, now: datetime
) -> None:
    await conn.execute(
        update(campaign_feedback_counts)
        .where(_counts.campaign_id == campaign_id)
        .values(auto_paused_at=now, auto_pause_reason=reason)
    )


async def rebase(conn: AsyncConnection, campaign_id: int, tally: FeedbackTally) -> bool:
    """An operator resumed after an auto-pause: thresholds apply from `tally` on. Returns
    whether the campaign had paused itself (nothing changes otherwise)."""
    result = await conn.execute(
        update(campaign_feedback_counts)
        .where(_counts.campaign_id == campaign_id, _counts.auto_paused_at.is_not(None))
        .values(
            baseline_sent=tally.sent,
            baseline_hard_bounced=tally.hard_bounced,
            baseline_complained=tally.complained,
            auto_paused_at=None,
            auto_pause_reason=None,
        )
    )
    return bool(result.rowcount)
