"""The write between two chunks of a batch (SND-10, SND-12): the previous chunk's outcomes
settled and counted, then — while the send is still on — the next chunk's recipients marked in
flight, with the consent rule re-run for them in the same write. One statement on PostgreSQL,
built once and compiled once; SQLite takes the same steps one at a time (`batch_claims`)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    String,
    and_,
    any_,
    bindparam,
    case,
    exists,
    false,
    func,
    null,
    select,
    true,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import Select

from tidings.domain.sending import BatchStatus, CampaignStatus, Exclusion, RecipientState
from tidings.storage.bulk import unnested
from tidings.storage.consent import mailable
from tidings.storage.dialect import is_postgresql
from tidings.storage.sending import batch_claims
from tidings.storage.sending.batch_claims import Withdrawn
from tidings.storage.sending.campaign_sends import status
from tidings.storage.tables import (
    campaign_batches,
    campaign_recipients,
    campaigns,
    subscribers,
    subscriptions,
)

Outcome = tuple[int, RecipientState, str | None]  # recipient id, settled state, reason


async def settle_and_mark(
    conn: AsyncConnection,
    batch_id: int,
    *,
    campaign_id: int,
    newsletter_id: int,
    settled: Sequence[Outcome],
    ids: Sequence[int],
    in_flight: RecipientState,
    token: str,
    now: datetime,
) -> list[Withdrawn] | None:
    """Settle `settled` from `in_flight`, then mark `ids` from `pending` to `in_flight`,
    excluding whoever is no longer mailable. Every change only under the batch's claim
    (`token`). Returns the excluded; None when the send is no longer submitting (paused or
    cancelled, SND-23): the outcomes are settled and nothing is marked."""
    if is_postgresql(conn) and not {outcome[0] for outcome in settled} & set(ids):
        return await _settle_and_mark_postgresql(
            conn,
            {
                "chunk_batch_id": batch_id,
                "chunk_campaign_id": campaign_id,
                "chunk_newsletter_id": newsletter_id,
                "chunk_token": token,
                "chunk_now": now,
                "chunk_in_flight": in_flight.value,
                "chunk_ids": list(ids),
                "settled_id": [outcome[0] for outcome in settled],
                "settled_state": [outcome[1].value for outcome in settled],
                "settled_reason": [outcome[2] for outcome in settled],
            },
        )
    return await _settle_and_mark_sqlite(
        conn,
        batch_id,
        campaign_id=campaign_id,
        newsletter_id=newsletter_id,
        settled=settled,
        ids=ids,
        in_flight=in_flight,
        token=token,
        now=now,
    )


async def _settle_and_mark_sqlite(
    conn: AsyncConnection,
    batch_id: int,
    *,
    campaign_id: int,
    newsletter_id: int,
    settled: Sequence[Outcome],
    ids: Sequence[int],
    in_flight: RecipientState,
    token: str,
    now: datetime,
) -> list[Withdrawn] | None:
    """The same steps one at a time (SQLite; on PostgreSQL too when a row is both settled and
    marked, which one statement's snapshot cannot do)."""
    if settled:
        await batch_claims.settle(
            conn, batch_id, settled, token=token, now=now, from_state=in_flight
        )
    if await status(conn, campaign_id) != CampaignStatus.SUBMITTING:
        return None
    return await batch_claims.mark_in_flight(
        conn,
        batch_id,
        ids,
        newsletter_id=newsletter_id,
        token=token,
        now=now,
        to_state=in_flight,
    )


async def _settle_and_mark_postgresql(
    conn: AsyncConnection, parameters: dict[str, Any]
) -> list[Withdrawn] | None:
    """PostgreSQL: the one statement (`_statement`). The parameters are named apart from
    every column: an UPDATE given execution parameters named like its table's columns would
    SET those columns from them."""
    rows = list(await conn.execute(_statement(), parameters))
    if not rows[0].sending:
        return None
    return [
        Withdrawn(int(row.id), row.subscriber_id, str(row.reason))
        for row in rows
        if row.id is not None
    ]


@functools.cache
def _statement() -> Select[Any]:
    """The PostgreSQL statement, as data-modifying CTEs (they see one snapshot, and touch
    disjoint rows: the settled chunk is `in_flight`, the marked one `pending`):

    - `settled`: each outcome onto its row, from `in_flight`;
    - `sending`: whether the send is still submitting;
    - `found`: (only while sending) the chunk's rows whose subscriber left, with the reason;
    - `excluded` / `marked`: those rows excluded, the rest moved to `in_flight` (unless that
      is `pending`, as for a batch call: then they are left as they are);
    - `counted`: the batch's counts raised by what was settled and excluded (SND-14);
    then one row per withdrawn recipient (or one empty row), each carrying `sending`."""
    r = campaign_recipients
    batch_id = bindparam("chunk_batch_id", type_=BigInteger)
    token = bindparam("chunk_token", type_=String)
    now = bindparam("chunk_now", type_=r.c.updated_at.type)
    in_flight = bindparam("chunk_in_flight", type_=String)
    chunk = any_(bindparam("chunk_ids", type_=ARRAY(BigInteger)))
    holding = and_(
        campaign_batches.c.id == batch_id,
        campaign_batches.c.claim_token == token,
        campaign_batches.c.status == BatchStatus.SUBMITTING.value,
    )
    held = exists().where(holding)
    outcomes = unnested(
        {"id": BigInteger(), "state": String(), "reason": String()}, None, prefix="settled"
    )
    settled = (
        update(r)
        .where(r.c.id == outcomes.c.id, r.c.batch_id == batch_id, r.c.state == in_flight, held)
        .values(state=outcomes.c.state, reason=outcomes.c.reason, updated_at=now)
        .returning(r.c.state)
        .cte("settled")
    )
    sending = select(
        func.coalesce(
            select(campaigns.c.status == CampaignStatus.SUBMITTING.value)
            .where(campaigns.c.id == bindparam("chunk_campaign_id", type_=BigInteger))
            .scalar_subquery(),
            false(),
        ).label("sending")
    ).cte("sending")
    still_mailable = exists().where(
        subscriptions.c.subscriber_id == r.c.subscriber_id,
        subscriptions.c.newsletter_id == bindparam("chunk_newsletter_id", type_=BigInteger),
        subscribers.c.id == subscriptions.c.subscriber_id,
        mailable(),
    )
    gone = ~exists().where(subscribers.c.id == r.c.subscriber_id)
    found = (
        select(
            r.c.id,
            r.c.subscriber_id,
            case(
                (gone, Exclusion.MEMBER_NOT_FOUND.value),
                else_=Exclusion.CONSENT_WITHDRAWN.value,
            ).label("reason"),
        )
        .where(r.c.batch_id == batch_id, r.c.id == chunk, ~still_mailable)
        .where(select(sending.c.sending).scalar_subquery())
        .cte("found")
    )
    ours = [r.c.batch_id == batch_id, r.c.state == RecipientState.PENDING.value, held]
    excluded = (
        update(r)
        .where(r.c.id == found.c.id, *ours)
        .values(state=RecipientState.EXCLUDED.value, reason=found.c.reason, updated_at=now)
        .returning(r.c.id)
        .cte("excluded")
    )
    marked = (
        update(r)
        .where(
            r.c.id == chunk,
            *ours,
            r.c.id.not_in(select(found.c.id)),
            select(sending.c.sending).scalar_subquery(),
            in_flight != RecipientState.PENDING.value,  # a batch call's rows stay as they are
        )
        .values(state=in_flight, reason=null(), updated_at=now)
        .returning(r.c.id)
        .cte("marked")
    )

    def added(state: RecipientState) -> Any:
        return (
            select(func.count())
            .select_from(settled)
            .where(settled.c.state == state.value)
            .scalar_subquery()
        )

    additions = {
        "submitted_count": added(RecipientState.SENT),
        "failed_count": added(RecipientState.FAILED),
        "uncertain_count": added(RecipientState.UNCERTAIN),
        "submission_excluded_count": added(RecipientState.EXCLUDED)
        + select(func.count()).select_from(excluded).scalar_subquery(),
    }
    counted = (
        update(campaign_batches)
        .where(
            holding,
            # nothing settled or excluded: the batch row is left alone
            exists(select(settled.c.state)) | exists(select(excluded.c.id)),
        )
        .values(
            {
                name: case(
                    (addition > 0, func.coalesce(campaign_batches.c[name], 0) + addition),
                    else_=campaign_batches.c[name],
                )
                for name, addition in additions.items()
            }
        )
        .cte("counted")
    )
    return (
        select(
            sending.c.sending.label("sending"),
            found.c.id,
            found.c.subscriber_id,
            found.c.reason,
        )
        .select_from(sending.outerjoin(found, true()))
        .add_cte(marked, counted)
    )
