"""Named queries for campaign batches: one page of candidates becomes at most one batch in one
transaction (SND-4, SND-6), the verification reads (SND-7, SND-14) and bounded discard (SND-8)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, delete, exists, func, insert, literal, or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.sending import BatchCounts, BatchStatus, Exclusion, Page, RecipientState
from tidings.storage.tables import (
    campaign_batches,
    campaign_candidates,
    campaign_recipients,
    subscribers,
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


@dataclass(frozen=True, slots=True)
class PageResult:
    batch_id: int | None  # None when every candidate of the page was excluded
    recipient_count: int
    exclusions: list[tuple[int | None, int, str]]  # (subscriber id, position, reason)


def _row(row: Any) -> BatchRow:
    return BatchRow(**dict(row._mapping))


def sendable_address() -> Any:
    """What preparation can tell about an address: present, one @ with text on both sides,
    within the length limit. Anything else is an `invalid_address` exclusion."""
    email = subscribers.c.email
    return and_(email.is_not(None), email.like("%_@_%"), func.length(email) <= 320)


def _in_page(campaign_id: int, page: Page) -> Any:
    return and_(
        campaign_candidates.c.campaign_id == campaign_id,
        campaign_candidates.c.position.between(page.first, page.last),
    )


async def create_page_batch(
    conn: AsyncConnection, campaign_id: int, page: Page, *, now: datetime
) -> PageResult:
    """Write one page in the caller's one transaction: its batch, then ONE INSERT … SELECT
    that makes every candidate of the page a recipient row of the batch or an exclusion
    (gone since selection, or no usable address), then `recipient_count` counted from the
    rows stored. A page of only exclusions leaves no batch.

    On PostgreSQL the page's commit does not wait for its WAL to reach the disk (a thousand
    pages, a thousand flushes). Nothing is lost by it: `prepared_at` is written later by an
    ordinary commit, whose flush carries every earlier page with it (the WAL is written in
    order), and a crash before that leaves an unprepared attempt, discarded and rebuilt
    (SND-8); nothing is sent from a batch before `prepared_at`."""
    if conn.dialect.name == "postgresql":
        await conn.execute(text("SET LOCAL synchronous_commit TO OFF"))
    batch_id = (
        await conn.execute(
            insert(campaign_batches)
            .values(
                campaign_id=campaign_id,
                page=page.page,
                segment=page.segment,
                sending_domain=page.domain,
                first_position=page.first,
                last_position=page.last,
                status=BatchStatus.PENDING.value,
                recipient_count=0,
                created_at=now,
                updated_at=now,
            )
            .returning(campaign_batches.c.id)
        )
    ).scalar_one()
    found = subscribers.c.id.is_not(None)
    sendable = and_(found, sendable_address())
    rows = (
        select(
            literal(campaign_id),
            case((sendable, literal(batch_id)), else_=None),
            subscribers.c.id,
            campaign_candidates.c.position,
            case(
                (sendable, literal(RecipientState.PENDING.value)),
                else_=literal(RecipientState.EXCLUDED.value),
            ),
            case(
                (~found, literal(Exclusion.MEMBER_NOT_FOUND.value)),
                (~sendable, literal(Exclusion.INVALID_ADDRESS.value)),
                else_=None,
            ),
            literal(now, campaign_recipients.c.updated_at.type),
        )
        .select_from(campaign_candidates)
        .outerjoin(subscribers, subscribers.c.id == campaign_candidates.c.subscriber_id)
        .where(_in_page(campaign_id, page))
    )
    columns = [
        "campaign_id",
        "batch_id",
        "subscriber_id",
        "position",
        "state",
        "reason",
        "updated_at",
    ]
    await conn.execute(insert(campaign_recipients).from_select(columns, rows))
    # Counted from the rows stored (drivers differ in reporting INSERT … SELECT row counts).
    inserted = (
        await conn.execute(select(func.count()).where(campaign_recipients.c.batch_id == batch_id))
    ).scalar_one()
    excluded = await conn.execute(
        select(
            campaign_recipients.c.subscriber_id,
            campaign_recipients.c.position,
            campaign_recipients.c.reason,
        ).where(
            campaign_recipients.c.campaign_id == campaign_id,
            campaign_recipients.c.state == RecipientState.EXCLUDED.value,
            campaign_recipients.c.batch_id.is_(None),
            campaign_recipients.c.position.between(page.first, page.last),
        )
    )
    exclusions = [(row[0], row[1], str(row[2])) for row in excluded]
    if inserted == 0:
        await conn.execute(delete(campaign_batches).where(campaign_batches.c.id == batch_id))
        return PageResult(None, 0, exclusions)
    await conn.execute(
        update(campaign_batches)
        .where(campaign_batches.c.id == batch_id)
        .values(recipient_count=inserted)
    )
    return PageResult(batch_id, int(inserted), exclusions)


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
    """One bounded step of discarding an unprepared attempt: recipients first, then batches
    (only pending ones: anything else blocks cleanup). Returns rows removed (0 = done)."""
    doomed = (
        select(campaign_recipients.c.id)
        .where(campaign_recipients.c.campaign_id == campaign_id)
        .limit(limit)
    )
    removed = (
        await conn.execute(delete(campaign_recipients).where(campaign_recipients.c.id.in_(doomed)))
    ).rowcount
    if removed:
        return int(removed)
    doomed_batches = (
        select(campaign_batches.c.id)
        .where(
            campaign_batches.c.campaign_id == campaign_id,
            campaign_batches.c.status == BatchStatus.PENDING.value,
        )
        .limit(limit)
    )
    return int(
        (
            await conn.execute(
                delete(campaign_batches).where(campaign_batches.c.id.in_(doomed_batches))
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


async def count_unsettled(conn: AsyncConnection, campaign_id: int) -> int:
    query = select(func.count()).select_from(campaign_batches).where(unsettled_clause(campaign_id))
    return int((await conn.execute(query)).scalar_one())


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
