"""The yardsticks the benchmarks measure tidings against, in the same run on the same tables:
the least SQL that writes the same rows, with none of tidings' checks."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, insert, literal, select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.segments import AudienceFilter
from tidings.storage.sending.candidates import audience
from tidings.storage.tables import campaign_recipients, engagement_intake, inbound_events


async def reference_insert_select(
    conn: AsyncConnection, campaign_id: int, newsletter_id: int, audience_filter: AudienceFilter
) -> int:
    """The benchmark's yardstick (BEN-1): the same audience written as recipient rows by ONE
    bare INSERT … SELECT, no pages, no verification. Returns the rows written."""
    chosen = audience(newsletter_id, audience_filter).subquery()
    await conn.execute(
        insert(campaign_recipients).from_select(
            ["campaign_id", "subscriber_id", "position", "state", "updated_at"],
            select(
                literal(campaign_id),
                chosen.c.subscriber_id,
                literal(0),
                literal("excluded"),
                func.current_timestamp(),
            ),
        )
    )
    counted = select(func.count()).where(campaign_recipients.c.campaign_id == campaign_id)
    return int((await conn.execute(counted)).scalar_one())


async def bare_event_insert(
    conn: AsyncConnection, rows: list[dict[str, Any]], *, chunk: int
) -> None:
    """The events benchmark's yardstick: `rows` written as received events by plain
    multi-row INSERTs of `chunk` rows, no lookups, no policy."""
    for start in range(0, len(rows), chunk):
        await conn.execute(inbound_events.insert().values(rows[start : start + chunk]))


async def bare_intake_insert(
    conn: AsyncConnection, rows: list[dict[str, Any]], *, chunk: int
) -> None:
    """The tracking benchmark's yardstick: `rows` written as received hits by plain multi-row
    INSERTs of `chunk` rows, no token, no lookup, no classification."""
    for start in range(0, len(rows), chunk):
        await conn.execute(engagement_intake.insert().values(rows[start : start + chunk]))
