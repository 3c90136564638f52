"""Named queries for campaign batches: the batch reads, the verification reads (SND-7, SND-14)
and bounded discard (SND-8). A page becomes a batch in `batch_pages`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, exists, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.sending import BatchCounts, BatchStatus
from tidings.storage.bulk import among
from tidings.storage.tables import (
    campaign_batches,
    campaign_recipients,
)


@dataclass(frozen=True, slots=True)
class BatchRow:
    id: int
    campaign_id: int
    page: int
    segment: str
    sending_domain: str
    first_position: int
    last_position: int
    status: str
    recipient_count: int
    submitted_count: int | None
    submission_excluded_count: int | None
    failed_count: int | None
    uncertain_count: int | None
    provider_message_id: str | None
    claim_token: str | None
    claimed_at: datetime | None
    claimed_by: str | None
    handed_over_at: datetime | None
    error_code: str | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


def _row(row: Any) -> BatchRow:
    return BatchRow(**dict(row._mapping))


async def get_page(conn: AsyncConnection, campaign_id: int, page: int) -> BatchRow | None:
    query = select(campaign_batches).where(
        campaign_batches.c.campaign_id == campaign_id, campaign_batches.c.page == page
    )
    row = (await conn.execute(query)).first()
    return None if row is None else _row(row)


async def get(conn: AsyncConnection, batch_id: int) -> BatchRow | None:
    row = (
        await conn.execute(select(campaign_batches).where(campaign_batches.c.id == batch_id))
    ).first()
    return None if row is None else _row(row)


async def list_for(conn: AsyncConnection, campaign_id: int) -> list[BatchRow]:
    query = (
        select(campaign_batches)
        .where(campaign_batches.c.campaign_id == campaign_id)
        .order_by(campaign_batches.c.page)
    )
    return [_row(row) for row in await conn.execute(query)]


async def rows_per_batch(conn: AsyncConnection, campaign_id: int) -> dict[int, int]:
    """Recipient rows actually stored per batch of the campaign (SND-7)."""
    query = (
        select(campaign_recipients.c.batch_id, func.count())
        .where(
            campaign_recipients.c.campaign_id == campaign_id,
            campaign_recipients.c.batch_id.is_not(None),
        )
        .group_by(campaign_recipients.c.batch_id)
    )
    return {int(batch_id): int(count) for batch_id, count in await conn.execute(query)}


async def states_per_batch(conn: AsyncConnection, campaign_id: int) -> dict[int, BatchCounts]:
    query = (
        select(campaign_recipients.c.batch_id, campaign_recipients.c.state, func.count())
        .where(
            campaign_recipients.c.campaign_id == campaign_id,
            campaign_recipients.c.batch_id.is_not(None),
        )
        .group_by(campaign_recipients.c.batch_id, campaign_recipients.c.state)
    )
    found: dict[int, dict[str, int]] = {}
    for batch_id, state, count in await conn.execute(query):
        found.setdefault(int(batch_id), {})[state] = int(count)
    return {batch_id: BatchCounts(states) for batch_id, states in found.items()}


async def cross_campaign_rows(conn: AsyncConnection, campaign_id: int) -> tuple[int, int]:
    """Ownership in both directions: (rows of this campaign sitting in another campaign's
    batch, rows of another campaign sitting in this campaign's batches)."""
    joined = campaign_recipients.join(
        campaign_batches, campaign_batches.c.id == campaign_recipients.c.batch_id
    )
    ours_elsewhere = (
        select(func.count())
        .select_from(joined)
        .where(
            campaign_recipients.c.campaign_id == campaign_id,
            campaign_batches.c.campaign_id != campaign_id,
        )
    )
    theirs_here = (
        select(func.count())
        .select_from(joined)
        .where(
            campaign_batches.c.campaign_id == campaign_id,
            campaign_recipients.c.campaign_id != campaign_id,
        )
    )
    return (
        int((await conn.execute(ours_elsewhere)).scalar_one()),
        int((await conn.execute(theirs_here)).scalar_one()),
    )


async def preparation_exclusions(conn: AsyncConnection, campaign_id: int) -> int:
    query = select(func.count()).where(
        campaign_recipients.c.campaign_id == campaign_id,
        campaign_recipients.c.batch_id.is_(None),
    )
    return int((await conn.execute(query)).scalar_one())


async def submission_started(conn: AsyncConnection, campaign_id: int) -> bool:
    """Whether any batch of the campaign ever left `pending` (claimed, even if handed back
    since): the send is in its submitting phase from then on (SND-17)."""
    query = select(
        exists().where(
            campaign_batches.c.campaign_id == campaign_id,
            (campaign_batches.c.claimed_at.is_not(None))
            | (campaign_batches.c.status != BatchStatus.PENDING.value),
        )
    )
    return bool((await conn.execute(query)).scalar_one())


async def count_not_pending(conn: AsyncConnection, campaign_id: int) -> int:
    query = select(func.count()).where(
        campaign_batches.c.campaign_id == campaign_id,
        campaign_batches.c.status != BatchStatus.PENDING.value,
    )
    return int((await conn.execute(query)).scalar_one())


async def discard_some(conn: AsyncConnection, campaign_id: int, *, limit: int) -> int:
    """One bounded step of discarding an unprepared attempt, whose batches are all still
    `pending`: whole batches, oldest first, about `limit` recipients' worth (at least one),
    their recipients found by `batch_id`; once no batch is left, the exclusions preparation
    made, which no batch holds. Returns rows removed (0 = done).

    A batch step finds its rows through the batches it removes, not by scanning the
    campaign's rows: a scan passes every row earlier steps deleted (dead until vacuum), which
    made discarding a million recipients grow with the square of their number. The last
    steps, for the exclusions, still select by campaign: they pass only what those same steps
    deleted."""
    listed = (
        select(
            campaign_batches.c.id,
            (
                func.sum(campaign_batches.c.recipient_count).over(order_by=campaign_batches.c.id)
                - campaign_batches.c.recipient_count
            ).label("before"),
        )
        .where(
            campaign_batches.c.campaign_id == campaign_id,
            campaign_batches.c.status == BatchStatus.PENDING.value,
        )
        .subquery()
    )
    doomed = [
        row.id for row in await conn.execute(select(listed.c.id).where(listed.c.before < limit))
    ]
    if doomed:
        removed = (
            await conn.execute(
                delete(campaign_recipients).where(
                    among(conn, campaign_recipients.c.batch_id, doomed)
                )
            )
        ).rowcount
        batches = (
            await conn.execute(
                delete(campaign_batches).where(among(conn, campaign_batches.c.id, doomed))
            )
        ).rowcount
        return int(removed) + int(batches)
    unbatched = (
        select(campaign_recipients.c.id)
        .where(
            campaign_recipients.c.campaign_id == campaign_id,
            campaign_recipients.c.batch_id.is_(None),
        )
        .limit(limit)
    )
    return int(
        (
            await conn.execute(
                delete(campaign_recipients).where(campaign_recipients.c.id.in_(unbatched))
            )
        ).rowcount
    )


def unsettled_clause(campaign_id: int) -> Any:
    """Batches still owing work: pending, or submitting without a recorded uncertainty."""
    return and_(
        campaign_batches.c.campaign_id == campaign_id,
        or_(
            campaign_batches.c.status == BatchStatus.PENDING.value,
            and_(
                campaign_batches.c.status == BatchStatus.SUBMITTING.value,
                campaign_batches.c.error_code.is_(None),
            ),
        ),
    )


async def any_unsettled(conn: AsyncConnection, campaign_id: int) -> bool:
    """Whether any batch still owes work: asked after every batch's outcome, so it stops at
    the first one found (a count would read all of a large campaign's open batches)."""
    query = select(exists().where(unsettled_clause(campaign_id)))
    return bool((await conn.execute(query)).scalar_one())


async def unfinished_ids(conn: AsyncConnection, campaign_id: int) -> list[int]:
    """Batches a (re)started send must dispatch: those still owing work. Submitted and failed
    ones are skipped, and so is a batch left `submitting` with a recorded uncertainty (its
    provider may have accepted it: an operator reconciles it, nothing resends it)."""
    query = (
        select(campaign_batches.c.id)
        .where(unsettled_clause(campaign_id))
        .order_by(campaign_batches.c.page)
    )
    return [int(batch_id) for batch_id in (await conn.execute(query)).scalars()]


async def allocated_since(conn: AsyncConnection, domain: str, since: datetime) -> int:
    """Recipients put on `domain` by batches created since `since` (warming capacity, SND-5)."""
    query = select(func.coalesce(func.sum(campaign_batches.c.recipient_count), 0)).where(
        campaign_batches.c.sending_domain == domain, campaign_batches.c.created_at >= since
    )
    return int((await conn.execute(query)).scalar_one())


async def submission_window(conn: AsyncConnection, campaign_id: int) -> tuple[Any, Any]:
    """(first claim, last finish) over the campaign's batches: the submission's span."""
    query = select(
        func.min(campaign_batches.c.claimed_at), func.max(campaign_batches.c.finished_at)
    ).where(campaign_batches.c.campaign_id == campaign_id)
    first, last = (await conn.execute(query)).one()
    return first, last


async def page_count(conn: AsyncConnection, campaign_id: int) -> int:
    query = select(func.coalesce(func.max(campaign_batches.c.page), 0)).where(
        campaign_batches.c.campaign_id == campaign_id
    )
    return int((await conn.execute(query)).scalar_one())
