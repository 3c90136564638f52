"""One page of candidates becomes at most one batch, in one transaction (SND-4, SND-6): one
statement on PostgreSQL, the same writes step by step on SQLite, and what a retry finds of a
page that did commit though its caller never heard back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    CTE,
    Integer,
    and_,
    case,
    cast,
    delete,
    func,
    insert,
    literal,
    null,
    select,
    text,
    true,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.sending import BatchStatus, Exclusion, Page, RecipientState
from tidings.storage.dialect import is_postgresql
from tidings.storage.tables import (
    campaign_batches,
    campaign_candidates,
    campaign_recipients,
    subscribers,
)

_RECIPIENT_COLUMNS = [
    "campaign_id",
    "batch_id",
    "subscriber_id",
    "position",
    "state",
    "reason",
    "updated_at",
]


@dataclass(frozen=True, slots=True)
class PageResult:
    batch_id: int | None  # None when every candidate of the page was excluded
    recipient_count: int
    exclusions: list[tuple[int | None, int, str]]  # (subscriber id, position, reason)


def sendable_address() -> Any:
    """What preparation can tell about an address: present, one @ with text on both sides,
    within the length limit. Anything else is an `invalid_address` exclusion."""
    email = subscribers.c.email
    return and_(email.is_not(None), email.like("%_@_%"), func.length(email) <= 320)


def _page_candidates(campaign_id: int, page: Page) -> CTE:
    """The page's candidates and what can be told of each now: `sendable` true or false,
    NULL when the subscriber is gone since selection. A correlated lookup, so one primary-key
    probe per candidate whatever the audience size: as a join, PostgreSQL hashed the whole
    `subscribers` table for each page of 1,000. Materialized, so it is evaluated once."""
    sendable = (
        select(func.coalesce(sendable_address(), False))
        .where(subscribers.c.id == campaign_candidates.c.subscriber_id)
        .scalar_subquery()
    )
    return (
        select(
            campaign_candidates.c.position,
            campaign_candidates.c.subscriber_id,
            sendable.label("sendable"),
        )
        .where(
            campaign_candidates.c.campaign_id == campaign_id,
            campaign_candidates.c.position.between(page.first, page.last),
        )
        .cte("page_candidates")
        .prefix_with("MATERIALIZED")
    )


def _recipient_rows(campaign_id: int, candidates: CTE, batch_id: Any, now: datetime) -> list[Any]:
    """Every candidate of the page as a recipient row: of the batch, or an exclusion."""
    sendable = candidates.c.sendable
    return [
        literal(campaign_id),
        case((sendable, batch_id), else_=None),
        case((sendable.is_not(None), candidates.c.subscriber_id), else_=None),
        candidates.c.position,
        case(
            (sendable, literal(RecipientState.PENDING.value)),
            else_=literal(RecipientState.EXCLUDED.value),
        ),
        case(
            (sendable.is_(None), literal(Exclusion.MEMBER_NOT_FOUND.value)),
            (~sendable, literal(Exclusion.INVALID_ADDRESS.value)),
            else_=None,
        ),
        literal(now, campaign_recipients.c.updated_at.type),
    ]


def _batch_values(campaign_id: int, page: Page, now: datetime) -> dict[str, Any]:
    return {
        "campaign_id": campaign_id,
        "page": page.page,
        "segment": page.segment,
        "sending_domain": page.domain,
        "first_position": page.first,
        "last_position": page.last,
        "status": BatchStatus.PENDING.value,
        "created_at": now,
        "updated_at": now,
    }


async def create_page_batch(
    conn: AsyncConnection, campaign_id: int, page: Page, *, now: datetime
) -> PageResult:
    """Write one page in the caller's one transaction: every candidate of the page becomes a
    recipient row of its batch or an exclusion (gone since selection, or no usable address),
    with `recipient_count` the rows of the batch. A page of only exclusions leaves no batch.

    On PostgreSQL the page's commit does not wait for its WAL to reach the disk (a thousand
    pages, a thousand flushes). Nothing is lost by it: `prepared_at` is written later by an
    ordinary commit, whose flush carries every earlier page with it (the WAL is written in
    order), and a crash before that leaves an unprepared attempt, discarded and rebuilt
    (SND-8); nothing is sent from a batch before `prepared_at`."""
    if is_postgresql(conn):
        await conn.execute(text("SET LOCAL synchronous_commit TO OFF"))
        return await _create_page_batch_postgresql(conn, campaign_id, page, now=now)
    return await _create_page_batch_sqlite(conn, campaign_id, page, now=now)


async def _create_page_batch_postgresql(
    conn: AsyncConnection, campaign_id: int, page: Page, *, now: datetime
) -> PageResult:
    """PostgreSQL: the batch row (its `recipient_count` counted from the page's candidates,
    no row when none is sendable), the recipient rows from the same candidates, and the
    exclusions read back through RETURNING, in one statement: one round trip a page instead
    of five, and no read of the exclusions through an index of the whole table."""
    candidates = _page_candidates(campaign_id, page)
    values = _batch_values(campaign_id, page, now)
    timestamp = campaign_batches.c.created_at.type
    batch = (
        insert(campaign_batches)
        .from_select(
            [*values, "recipient_count"],
            select(
                *(
                    literal(value, timestamp) if isinstance(value, datetime) else literal(value)
                    for value in values.values()
                ),
                func.count(),
            )
            .where(candidates.c.sendable)
            .having(func.count() > 0),
        )
        .returning(campaign_batches.c.id, campaign_batches.c.recipient_count)
        .cte("page_batch")
    )
    written = (
        insert(campaign_recipients)
        .from_select(
            _RECIPIENT_COLUMNS,
            select(*_recipient_rows(campaign_id, candidates, batch.c.id, now)).select_from(
                candidates.outerjoin(batch, true())
            ),
        )
        .returning(
            campaign_recipients.c.batch_id,
            campaign_recipients.c.subscriber_id,
            campaign_recipients.c.position,
            campaign_recipients.c.reason,
        )
        .cte("page_rows")
    )
    nothing = cast(null(), Integer)
    statement = union_all(
        select(batch.c.id, batch.c.recipient_count, nothing, nothing, null()),
        select(
            nothing, nothing, written.c.subscriber_id, written.c.position, written.c.reason
        ).where(written.c.batch_id.is_(None)),
    )
    batch_id: int | None = None
    recipient_count = 0
    exclusions: list[tuple[int | None, int, str]] = []
    for row in await conn.execute(statement):
        if row[0] is not None:
            batch_id, recipient_count = int(row[0]), int(row[1])
        else:
            exclusions.append((row[2], int(row[3]), str(row[4])))
    exclusions.sort(key=lambda exclusion: exclusion[1])
    return PageResult(batch_id, recipient_count, exclusions)


async def _create_page_batch_sqlite(
    conn: AsyncConnection, campaign_id: int, page: Page, *, now: datetime
) -> PageResult:
    """The same writes as `_create_page_batch_postgresql`, one at a time: the batch row, ONE
    INSERT … SELECT of the page's recipient rows, the count, the exclusions, then the
    count stored (or the batch removed when nothing in the page was sendable)."""
    batch_id = (
        await conn.execute(
            insert(campaign_batches)
            .values(**_batch_values(campaign_id, page, now), recipient_count=0)
            .returning(campaign_batches.c.id)
        )
    ).scalar_one()
    candidates = _page_candidates(campaign_id, page)
    await conn.execute(
        insert(campaign_recipients).from_select(
            _RECIPIENT_COLUMNS,
            select(*_recipient_rows(campaign_id, candidates, literal(batch_id), now)),
        )
    )
    # Counted from the rows stored (drivers differ in reporting INSERT … SELECT row counts).
    inserted = (
        await conn.execute(select(func.count()).where(campaign_recipients.c.batch_id == batch_id))
    ).scalar_one()
    exclusions = await page_exclusions(conn, campaign_id, page)
    if inserted == 0:
        await conn.execute(delete(campaign_batches).where(campaign_batches.c.id == batch_id))
        return PageResult(None, 0, exclusions)
    await conn.execute(
        update(campaign_batches)
        .where(campaign_batches.c.id == batch_id)
        .values(recipient_count=inserted)
    )
    return PageResult(batch_id, int(inserted), exclusions)


async def page_exclusions(
    conn: AsyncConnection, campaign_id: int, page: Page
) -> list[tuple[int | None, int, str]]:
    """The page's stored exclusions (subscriber id, position, reason), by position."""
    query = (
        select(
            campaign_recipients.c.subscriber_id,
            campaign_recipients.c.position,
            campaign_recipients.c.reason,
        )
        .where(
            campaign_recipients.c.campaign_id == campaign_id,
            campaign_recipients.c.state == RecipientState.EXCLUDED.value,
            campaign_recipients.c.batch_id.is_(None),
            campaign_recipients.c.position.between(page.first, page.last),
        )
        .order_by(campaign_recipients.c.position)
    )
    return [(row[0], int(row[1]), str(row[2])) for row in await conn.execute(query)]
