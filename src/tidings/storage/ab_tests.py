"""Named queries for a campaign's A/B test (ENG-8): the test, its start and its one decision;
the variant of each candidate as SQL (the same arithmetic as `domain.ab_tests.variant_of`);
and the per-variant figures the decision reads (O(batches + counter rows), never a recipient).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    String,
    case,
    cast,
    delete,
    func,
    insert,
    literal,
    select,
)
from sqlalchemy import update as sql_update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.ab_tests import (
    HASH_MODULUS,
    AbField,
    AbMetric,
    AbTest,
    AssignmentKey,
    share_cutoff,
)
from tidings.domain.tracking import PIXEL_NUMBER
from tidings.storage.sending.batches import unsettled_clause
from tidings.storage.tables import campaign_ab_tests, campaign_batches, engagement_counters

table = campaign_ab_tests.c


@dataclass(frozen=True, slots=True)
class AbTestRow:
    campaign_id: int
    test: AbTest
    test_started_at: datetime | None
    decided_at: datetime | None
    winner: int | None
    decided_by: str | None
    figures: dict[str, Any] | None

    @property
    def decided(self) -> bool:
        return self.winner is not None


def _row(row: Any) -> AbTestRow:
    values = row._mapping
    test = AbTest(
        field=AbField(values["field"]),
        alternatives=tuple(values["alternatives"]),
        test_share=int(values["test_share"]),
        wait=timedelta(seconds=int(values["wait_seconds"])),
        metric=AbMetric(values["metric"]),
    )
    return AbTestRow(
        int(values["campaign_id"]),
        test,
        values["test_started_at"],
        values["decided_at"],
        values["winner"],
        values["decided_by"],
        values["figures"],
    )


async def get(conn: AsyncConnection, campaign_id: int) -> AbTestRow | None:
    found = await conn.execute(select(campaign_ab_tests).where(table.campaign_id == campaign_id))
    row = found.first()
    return None if row is None else _row(row)


async def replace(conn: AsyncConnection, campaign_id: int, test: AbTest | None) -> None:
    """A draft's test as the operator last saved it (None: no test)."""
    await conn.execute(delete(campaign_ab_tests).where(table.campaign_id == campaign_id))
    if test is None:
        return
    await conn.execute(
        insert(campaign_ab_tests).values(
            campaign_id=campaign_id,
            field=test.field.value,
            alternatives=list(test.alternatives),
            test_share=test.test_share,
            wait_seconds=int(test.wait.total_seconds()),
            metric=test.metric.value,
        )
    )


async def mark_started(conn: AsyncConnection, campaign_id: int, now: datetime) -> datetime:
    """When the test's batches were first dispatched: set once, then kept across resumes."""
    await conn.execute(
        sql_update(campaign_ab_tests)
        .where(table.campaign_id == campaign_id, table.test_started_at.is_(None))
        .values(test_started_at=now)
    )
    query = select(table.test_started_at).where(table.campaign_id == campaign_id)
    started: datetime = (await conn.execute(query)).scalar_one()
    return started


async def record_decision(
    conn: AsyncConnection,
    campaign_id: int,
    *,
    winner: int,
    decided_by: str,
    figures: dict[str, Any],
    now: datetime,
) -> bool:
    """The one decision: True if this call made it, False if one was already recorded."""
    result = await conn.execute(
        sql_update(campaign_ab_tests)
        .where(table.campaign_id == campaign_id, table.winner.is_(None))
        .values(winner=winner, decided_by=decided_by, figures=figures, decided_at=now)
    )
    return bool(result.rowcount)


def segment_expression(
    subscriber_id: ColumnElement[Any], tier: ColumnElement[Any], key: AssignmentKey, test: AbTest
) -> ColumnElement[Any]:
    """`<tier>-v<n>` for a test recipient, the tier for the remainder: the bucket and the
    variant computed as `AssignmentKey.bucket` (Horner's rule) and `variant_of` do, in
    64-bit integers on both dialects."""
    modulus = literal(HASH_MODULUS, BigInteger)
    x = subscriber_id % modulus
    bucket: ColumnElement[Any] = literal(0, BigInteger)
    for coefficient in key.coefficients:
        bucket = (bucket * x + literal(coefficient, BigInteger)) % modulus
    cutoff = share_cutoff(test.test_share)
    variant = bucket * literal(test.variant_count) // literal(cutoff) + literal(1)
    return case(
        (bucket < literal(cutoff), tier + literal("-v") + cast(variant, String)), else_=tier
    )


async def unfinished_batches(conn: AsyncConnection, campaign_id: int) -> list[tuple[int, str]]:
    """(batch id, segment) of the batches still owing work, in page order."""
    query = (
        select(campaign_batches.c.id, campaign_batches.c.segment)
        .where(unsettled_clause(campaign_id))
        .order_by(campaign_batches.c.page)
    )
    return [(int(row.id), str(row.segment)) for row in await conn.execute(query)]


async def sent_per_segment(conn: AsyncConnection, campaign_id: int) -> dict[str, tuple[int, int]]:
    """Segment -> (recipients, handed over) from the campaign's batches."""
    query = (
        select(
            campaign_batches.c.segment,
            func.sum(campaign_batches.c.recipient_count),
            func.coalesce(func.sum(campaign_batches.c.submitted_count), 0),
        )
        .where(campaign_batches.c.campaign_id == campaign_id)
        .group_by(campaign_batches.c.segment)
    )
    return {
        str(segment): (int(recipients or 0), int(sent or 0))
        for segment, recipients, sent in await conn.execute(query)
    }


async def people_per_segment(conn: AsyncConnection, campaign_id: int) -> dict[str, dict[str, int]]:
    """Segment -> kind -> messages a person opened or clicked (human unique, link 0)."""
    counter = engagement_counters.c
    query = (
        select(counter.segment, counter.kind, func.sum(counter.human_unique))
        .where(counter.campaign_id == campaign_id, counter.number == PIXEL_NUMBER)
        .group_by(counter.segment, counter.kind)
    )
    found: dict[str, dict[str, int]] = {}
    for segment, kind, people in await conn.execute(query):
        found.setdefault(str(segment), {})[str(kind)] = int(people or 0)
    return found
