"""Named queries for submitting one batch (SND-9..13): the conditional claim, recipient state
changes and the batch's outcome (the recipient read is `batch_recipients`).

Every write here is made inside the queue's fenced transaction (the job's claim still held)
and is also conditional on the batch's own claim token, so a late worker changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple

from sqlalchemy import and_, case, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.sending import BatchCounts, BatchStatus, Exclusion, RecipientState
from tidings.storage.bulk import among
from tidings.storage.consent import mailable
from tidings.storage.dialect import database_timestamp
from tidings.storage.tables import (
    campaign_batches,
    campaign_recipients,
    jobs,
    subscribers,
    subscriptions,
)


class ClaimOutcome(StrEnum):
    """What claiming a batch found."""

    CLAIMED = "claimed"  # this token holds it now (or held it already)
    TAKEN_OVER = "taken_over"  # a stale claim taken over: its in-flight rows are unknown
    HELD = "held"  # a live claim: leave it alone
    FINISHED = "finished"  # submitted or failed already


def claim_is_live(token_column: Any) -> Any:
    """True while a running job holds `token_column`'s token under a lease unexpired by the
    database's clock (the queue's leases are judged by it, never by a worker's)."""
    return exists().where(
        jobs.c.claim_token == token_column,
        jobs.c.status == "running",
        jobs.c.locked_until > database_timestamp(),
    )


async def claim(
    conn: AsyncConnection, batch_id: int, *, token: str, now: datetime, worker: str = ""
) -> tuple[ClaimOutcome, str | None]:
    """Claim the batch for `token`: `pending -> submitting`, or take over a `submitting`
    batch whose claim is stale (its job no longer holds it). Returns the outcome and, for a
    takeover, the previous token."""
    fresh = await conn.execute(
        update(campaign_batches)
        .where(
            campaign_batches.c.id == batch_id,
            campaign_batches.c.status == BatchStatus.PENDING.value,
        )
        .values(
            status=BatchStatus.SUBMITTING.value,
            claim_token=token,
            claimed_at=now,
            claimed_by=worker[:100],
            handed_over_at=None,  # a retried batch starts with no call in flight
            # nor with the error its last attempt was released with: `submitting` with an
            # error code means "awaits an operator" (SND-13), which would let the campaign
            # be finalised, as uncertain, while this attempt sends.
            error_code=None,
            error=None,
            updated_at=now,
        )
    )
    if fresh.rowcount == 1:
        return ClaimOutcome.CLAIMED, None
    row = (
        await conn.execute(
            select(campaign_batches.c.status, campaign_batches.c.claim_token).where(
                campaign_batches.c.id == batch_id
            )
        )
    ).first()
    if row is None or row.status != BatchStatus.SUBMITTING.value:
        return ClaimOutcome.FINISHED, None
    if row.claim_token == token:
        return ClaimOutcome.CLAIMED, None
    stale = await conn.execute(
        update(campaign_batches)
        .where(
            campaign_batches.c.id == batch_id,
            campaign_batches.c.status == BatchStatus.SUBMITTING.value,
            campaign_batches.c.claim_token == row.claim_token,
            ~claim_is_live(campaign_batches.c.claim_token),
        )
        .values(claim_token=token, claimed_at=now, claimed_by=worker[:100], updated_at=now)
    )
    if stale.rowcount == 1:
        return ClaimOutcome.TAKEN_OVER, row.claim_token
    return ClaimOutcome.HELD, None


def _holding(batch_id: int, token: str) -> Any:
    """The batch row while `token` still holds its claim."""
    return and_(
        campaign_batches.c.id == batch_id,
        campaign_batches.c.claim_token == token,
        campaign_batches.c.status == BatchStatus.SUBMITTING.value,
    )


def _held(batch_id: int, token: str) -> Any:
    return exists().where(_holding(batch_id, token))


async def move(
    conn: AsyncConnection,
    batch_id: int,
    *,
    token: str,
    now: datetime,
    from_states: Sequence[RecipientState],
    to_state: RecipientState,
    ids: Sequence[int] | None = None,
    reason: str | None = None,
    counted: bool = True,
) -> int:
    """Move recipients (all of the batch, or `ids`) from `from_states` to `to_state`, only
    while `token` still holds the batch. Returns rows moved. With `counted` False the batch's
    counts are left alone: the caller writes them from the rows in the same transaction."""
    conditions = [
        campaign_recipients.c.batch_id == batch_id,
        campaign_recipients.c.state.in_([state.value for state in from_states]),
        _held(batch_id, token),
    ]
    if ids is not None:
        conditions.append(among(conn, campaign_recipients.c.id, ids))
    result = await conn.execute(
        update(campaign_recipients)
        .where(*conditions)
        .values(state=to_state.value, reason=reason, updated_at=now)
    )
    moved = int(result.rowcount)
    if counted and not any(state in _COUNT_COLUMNS for state in from_states):
        await _add_to_count(conn, batch_id, token, to_state, moved)
    return moved


# The batch's count column of each settled state (SND-11).
_COUNT_COLUMNS = {
    RecipientState.SENT: "submitted_count",
    RecipientState.EXCLUDED: "submission_excluded_count",
    RecipientState.FAILED: "failed_count",
    RecipientState.UNCERTAIN: "uncertain_count",
}


async def _add_to_count(
    conn: AsyncConnection, batch_id: int, token: str, state: RecipientState, added: int
) -> None:
    """Progress by chunk (SND-14, SND-17): `added` recipients just settled as `state` are
    counted on the batch in the same transaction, so its counts never lag its rows by more
    than the chunk in flight. The batch's outcome and every hand-back recount from rows."""
    name = _COUNT_COLUMNS.get(state)
    if name is None or added <= 0:
        return
    column = campaign_batches.c[name]
    await conn.execute(
        update(campaign_batches)
        .where(_holding(batch_id, token))
        .values({column: func.coalesce(column, 0) + added})
    )


class Withdrawn(NamedTuple):
    """A recipient found no longer mailable as its chunk was marked in flight."""

    id: int
    subscriber_id: int | None
    reason: str


async def mark_in_flight(
    conn: AsyncConnection,
    batch_id: int,
    ids: Sequence[int],
    *,
    newsletter_id: int,
    token: str,
    now: datetime,
    from_state: RecipientState = RecipientState.PENDING,
    to_state: RecipientState = RecipientState.SENDING,
) -> list[Withdrawn]:
    """SND-10, AUD-4 at the last moment: in the write that marks `ids` in flight, re-run the
    consent rule (the one SQL definition) and exclude whoever left since the batch was read —
    deleted (`member_not_found`), unsubscribed, unconfirmed again or suppressed
    (`consent_withdrawn`). The rest move `from_state -> to_state`. Returns the excluded."""
    if not ids:
        return []
    ours = [
        campaign_recipients.c.batch_id == batch_id,
        among(conn, campaign_recipients.c.id, ids),
        campaign_recipients.c.state == from_state.value,
        _held(batch_id, token),
    ]
    gone = ~exists().where(subscribers.c.id == campaign_recipients.c.subscriber_id)
    still_mailable = exists().where(
        subscriptions.c.subscriber_id == campaign_recipients.c.subscriber_id,
        subscriptions.c.newsletter_id == newsletter_id,
        subscribers.c.id == subscriptions.c.subscriber_id,
        mailable(),
    )
    reason = case(
        (gone, Exclusion.MEMBER_NOT_FOUND.value), else_=Exclusion.CONSENT_WITHDRAWN.value
    ).label("reason")
    # Who left is read whatever their row's state, so a write tried again after it committed
    # unacknowledged (an outage) still leaves them out of the chunk.
    found = [
        Withdrawn(int(row.id), row.subscriber_id, str(row.reason))
        for row in await conn.execute(
            select(campaign_recipients.c.id, campaign_recipients.c.subscriber_id, reason).where(
                campaign_recipients.c.batch_id == batch_id,
                among(conn, campaign_recipients.c.id, ids),
                ~still_mailable,
            )
        )
    ]
    for why in {row.reason for row in found}:
        left = [row.id for row in found if row.reason == why]
        excluded = await conn.execute(
            update(campaign_recipients)
            .where(*ours, among(conn, campaign_recipients.c.id, left))
            .values(state=RecipientState.EXCLUDED.value, reason=why, updated_at=now)
        )
        await _add_to_count(conn, batch_id, token, RecipientState.EXCLUDED, excluded.rowcount)
    if from_state == to_state:  # a batch call's rows stay `pending`: only exclusions change
        return found
    if found:
        ours.append(~among(conn, campaign_recipients.c.id, [row.id for row in found]))
    await conn.execute(
        update(campaign_recipients)
        .where(*ours)
        .values(state=to_state.value, reason=None, updated_at=now)
    )
    return found


async def settle(
    conn: AsyncConnection,
    batch_id: int,
    outcomes: Sequence[tuple[int, RecipientState, str | None]],
    *,
    token: str,
    now: datetime,
    from_state: RecipientState = RecipientState.SENDING,
    counted: bool = True,
) -> int:
    """Record each in-flight recipient's own outcome (SND-12), only from `from_state` and
    only under the batch claim: one statement per distinct (state, reason). `counted` as
    for `move`."""
    groups: dict[tuple[RecipientState, str | None], list[int]] = {}
    for recipient_id, state, reason in outcomes:
        groups.setdefault((state, reason), []).append(recipient_id)
    settled = 0
    for (state, reason), ids in groups.items():
        settled += await move(
            conn,
            batch_id,
            token=token,
            now=now,
            ids=ids,
            from_states=[from_state],
            to_state=state,
            reason=reason,
            counted=counted,
        )
    return settled


async def mark_handed_over(
    conn: AsyncConnection, batch_id: int, *, token: str, at: datetime | None
) -> bool:
    """A batch call is about to go out (`at`), or certainly did not (None): one row, not a
    thousand (the batch's recipients stay `pending` until the answer settles them)."""
    result = await conn.execute(
        update(campaign_batches)
        .where(
            campaign_batches.c.id == batch_id,
            campaign_batches.c.claim_token == token,
            campaign_batches.c.status == BatchStatus.SUBMITTING.value,
        )
        .values(handed_over_at=at)
    )
    return result.rowcount == 1


async def counts(conn: AsyncConnection, batch_id: int) -> BatchCounts:
    query = (
        select(campaign_recipients.c.state, func.count())
        .where(campaign_recipients.c.batch_id == batch_id)
        .group_by(campaign_recipients.c.state)
    )
    return BatchCounts({state: int(count) for state, count in await conn.execute(query)})


async def finish(
    conn: AsyncConnection,
    batch_id: int,
    *,
    token: str,
    now: datetime,
    status: BatchStatus,
    counts: BatchCounts,
    provider_message_id: str | None = None,
    error_code: str | None = None,
    error: str | None = None,
) -> bool:
    """Record the batch's outcome with absolute counts (SND-11), under its claim. A batch
    left `submitting` with an `error_code` awaits an operator's reconcile (SND-13)."""
    values: dict[str, Any] = {
        "status": status.value,
        **_count_values(counts),
        "provider_message_id": provider_message_id,
        "error_code": error_code,
        "error": error,
        "updated_at": now,
    }
    if status != BatchStatus.SUBMITTING:
        values.update(claim_token=None, finished_at=now)
    result = await conn.execute(
        update(campaign_batches).where(_holding(batch_id, token)).values(**values)
    )
    return result.rowcount == 1


def _count_values(tally: BatchCounts) -> dict[str, int]:
    """A batch's count columns, absolute, from its rows (SND-11, SND-14)."""
    return {
        "submitted_count": tally[RecipientState.SENT],
        "submission_excluded_count": tally[RecipientState.EXCLUDED],
        "failed_count": tally[RecipientState.FAILED],
        "uncertain_count": tally[RecipientState.UNCERTAIN],
    }


async def release(
    conn: AsyncConnection,
    batch_id: int,
    *,
    token: str,
    now: datetime,
    error_code: str | None = None,
    error: str | None = None,
) -> bool:
    """Give a claimed batch back (`submitting -> pending`) when its worker stops between
    chunks (shutdown, a retry later, an error, recorded with `error_code`): whoever claims it
    next sends what is still pending, with no takeover. Refused while any of its recipients is
    `sending` (their outcome is not known). Its counts are recounted from its rows."""
    tally = await counts(conn, batch_id)
    in_flight = exists().where(
        campaign_recipients.c.batch_id == batch_id,
        campaign_recipients.c.state == RecipientState.SENDING.value,
    )
    result = await conn.execute(
        update(campaign_batches)
        .where(_holding(batch_id, token), ~in_flight)
        .values(
            status=BatchStatus.PENDING.value,
            claim_token=None,
            updated_at=now,
            error_code=error_code,
            error=error,
            **_count_values(tally),
        )
    )
    return result.rowcount == 1
