"""Named queries for a send's status (SND-17, SND-18): the campaign with its send row, its
batches summed by status, and the timing samples of the ETA. None of them reads a recipient
row, and none reads more than a few rows per batch: a status poll is O(batches)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.eta import SAMPLES_BEFORE_WINDOW, Sample
from tidings.domain.send_status import BatchGroup, Phase
from tidings.domain.sending import BatchStatus
from tidings.storage.sending.campaign_sends import SendRow
from tidings.storage.tables import campaign_batches, campaign_sends, campaigns


async def campaign_send(
    conn: AsyncConnection, campaign_id: int
) -> tuple[str, SendRow | None] | None:
    """(campaign status, its send row or None before any send), or None for no campaign.
    One statement; the send row is read without its batches."""
    query = (
        select(campaigns.c.status.label("campaign_status"), campaign_sends)
        .select_from(campaigns)
        .outerjoin(campaign_sends, campaign_sends.c.campaign_id == campaigns.c.id)
        .where(campaigns.c.id == campaign_id)
    )
    row = (await conn.execute(query)).first()
    if row is None:
        return None
    values = dict(row._mapping)
    status = str(values.pop("campaign_status"))
    if values["campaign_id"] is None:
        return status, None
    return status, SendRow(**values)


def _total(column: Any) -> Any:
    return func.coalesce(func.sum(column), 0)


async def batch_groups(
    conn: AsyncConnection, campaign_id: int, *, since: datetime | None = None
) -> list[BatchGroup]:
    """The campaign's batches summed per status (one statement, a handful of rows), with
    each group's first claim made at or after `since` (the attempt's start)."""
    batches = campaign_batches.c
    settled = (
        func.coalesce(batches.submitted_count, 0)
        + func.coalesce(batches.submission_excluded_count, 0)
        + func.coalesce(batches.failed_count, 0)
        + func.coalesce(batches.uncertain_count, 0)
    )
    this_attempt = batches.claimed_at.is_not(None) if since is None else batches.claimed_at >= since
    claimed_since = case((this_attempt, batches.claimed_at))
    awaiting = case(
        (and_(batches.status == BatchStatus.SUBMITTING.value, batches.error_code.is_not(None)), 1),
        else_=0,
    ).label("awaiting")
    query = (
        select(
            batches.status,
            awaiting,
            func.count(),
            func.count(batches.claimed_at),
            _total(batches.recipient_count),
            _total(batches.last_position - batches.first_position + 1),
            _total(batches.submitted_count),
            _total(batches.submission_excluded_count),
            _total(batches.failed_count),
            _total(batches.uncertain_count),
            func.min(claimed_since),
            _total(case((this_attempt, settled), else_=0)),
        )
        .where(batches.campaign_id == campaign_id)
        .group_by(batches.status, awaiting)
    )
    return [
        BatchGroup(
            status=BatchStatus(status),
            awaiting_reconcile=bool(waiting),
            batches=int(count),
            claimed=int(claimed),
            recipients=int(recipients),
            positions=int(positions),
            sent=int(sent),
            excluded=int(excluded),
            failed=int(failed),
            uncertain=int(uncertain),
            first_claimed_at=first_claimed_at,
            settled_since=int(settled_since),
        )
        for (
            status,
            waiting,
            count,
            claimed,
            recipients,
            positions,
            sent,
            excluded,
            failed,
            uncertain,
            first_claimed_at,
            settled_since,
        ) in await conn.execute(query)
    ]


async def timing_samples(
    conn: AsyncConnection,
    campaign_id: int,
    phase: Phase,
    *,
    since: datetime,
    window_start: datetime,
) -> list[Sample]:
    """The phase's completions since `since` (the attempt's start) that the ETA can read:
    every one from `window_start` on, and the few just before it (`eta.relevant`)."""
    batches = campaign_batches.c
    if phase == Phase.PREPARING:  # a batch written: its page's candidates processed
        at = batches.created_at
        work = batches.last_position - batches.first_position + 1
    else:  # a batch finished: its recipients settled
        at = batches.finished_at
        work = (
            func.coalesce(batches.submitted_count, 0)
            + func.coalesce(batches.submission_excluded_count, 0)
            + func.coalesce(batches.failed_count, 0)
            + func.coalesce(batches.uncertain_count, 0)
        )
    mine = and_(batches.campaign_id == campaign_id, at.is_not(None), at >= since)
    in_window = select(at, work).where(mine, at >= window_start)
    before = (
        select(at, work)
        .where(mine, at < window_start)
        .order_by(at.desc())
        .limit(SAMPLES_BEFORE_WINDOW)
    )
    rows = [*await conn.execute(in_window), *await conn.execute(before)]
    return sorted((Sample(at=row[0], work=int(row[1])) for row in rows), key=lambda s: s.at)
