"""Named queries for an operator's repairs to a send (SND-13, SND-19): which batches are still
`submitting`, putting recipients and batches back to `pending` for the next attempt (counts
recounted from the rows), and the resendable-failure rule as SQL.

Only rows that nothing holds are changed: a retry or resend runs when no batch is
`submitting`, and a reconcile only on a batch whose claim no live job holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, exists, false, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.send_status import (
    RECONCILED_NOT_SENT,
    SENDER_REFUSED_REASONS,
    TRANSIENT_MARKERS,
)
from tidings.domain.sending import BatchStatus, RecipientState
from tidings.storage.sending.batch_claims import claim_is_live
from tidings.storage.tables import campaign_batches, campaign_recipients

# The recipient states a resend may choose from.
RESENDABLE_STATES = (RecipientState.UNCERTAIN, RecipientState.FAILED)


@dataclass(frozen=True, slots=True)
class SubmittingBatch:
    id: int
    claimed_by: str | None
    error_code: str | None


def resendable_failure() -> Any:
    """`domain.send_status.is_resendable_failure` over `campaign_recipients.reason`."""
    reason = campaign_recipients.c.reason
    return or_(
        reason == RECONCILED_NOT_SENT,
        sender_refused_failure(),
        *(func.lower(reason).contains(marker, autoescape=True) for marker in TRANSIENT_MARKERS),
    )


def sender_refused_failure() -> Any:
    """`domain.send_status.is_sender_refused_failure` over `campaign_recipients.reason`."""
    return func.lower(campaign_recipients.c.reason).in_(sorted(SENDER_REFUSED_REASONS))


def _resendable(states: Sequence[RecipientState]) -> Any:
    clauses = []
    if RecipientState.UNCERTAIN in states:
        clauses.append(campaign_recipients.c.state == RecipientState.UNCERTAIN.value)
    if RecipientState.FAILED in states:
        clauses.append(
            and_(campaign_recipients.c.state == RecipientState.FAILED.value, resendable_failure())
        )
    return or_(*clauses) if clauses else false()


async def submitting_batches(conn: AsyncConnection, campaign_id: int) -> list[SubmittingBatch]:
    query = (
        select(campaign_batches.c.id, campaign_batches.c.claimed_by, campaign_batches.c.error_code)
        .where(
            campaign_batches.c.campaign_id == campaign_id,
            campaign_batches.c.status == BatchStatus.SUBMITTING.value,
        )
        .order_by(campaign_batches.c.page)
    )
    return [
        SubmittingBatch(int(row.id), row.claimed_by, row.error_code)
        for row in await conn.execute(query)
    ]


async def count_not_submitted(conn: AsyncConnection, campaign_id: int) -> int:
    query = select(func.count()).where(
        campaign_batches.c.campaign_id == campaign_id,
        campaign_batches.c.status != BatchStatus.SUBMITTED.value,
    )
    return int((await conn.execute(query)).scalar_one())


async def batch_claim_is_live(conn: AsyncConnection, batch_id: int) -> bool:
    """True while a running job holds the batch's claim under an unexpired lease."""
    query = select(
        exists().where(
            campaign_batches.c.id == batch_id,
            claim_is_live(campaign_batches.c.claim_token),
        )
    )
    return bool((await conn.execute(query)).scalar_one())


async def count_resendable(
    conn: AsyncConnection, campaign_id: int, states: Sequence[RecipientState]
) -> int:
    query = select(func.count()).where(
        campaign_recipients.c.campaign_id == campaign_id, _resendable(states)
    )
    return int((await conn.execute(query)).scalar_one())


async def count_sender_refused(conn: AsyncConnection, campaign_id: int) -> int:
    """Recipients failed by a refusal of the sender (before it was told apart)."""
    query = select(func.count()).where(
        campaign_recipients.c.campaign_id == campaign_id,
        campaign_recipients.c.state == RecipientState.FAILED.value,
        sender_refused_failure(),
    )
    return int((await conn.execute(query)).scalar_one())


async def requeue_recipients(
    conn: AsyncConnection, campaign_id: int, states: Sequence[RecipientState], *, now: datetime
) -> int:
    """Uncertain recipients, and/or failed ones whose failure was transient, back to `pending`
    (their reason cleared). Sent, excluded and permanently failed rows are never touched."""
    result = await conn.execute(
        update(campaign_recipients)
        .where(campaign_recipients.c.campaign_id == campaign_id, _resendable(states))
        .values(state=RecipientState.PENDING.value, reason=None, updated_at=now)
    )
    return int(result.rowcount)


async def count_pending(conn: AsyncConnection, campaign_id: int) -> int:
    """Recipients of the campaign still to be sent: what the next attempt will hand over."""
    query = select(func.count()).where(
        campaign_recipients.c.campaign_id == campaign_id,
        campaign_recipients.c.state == RecipientState.PENDING.value,
    )
    return int((await conn.execute(query)).scalar_one())


def _rows_in(state: RecipientState) -> Any:
    return (
        select(func.count())
        .where(
            campaign_recipients.c.batch_id == campaign_batches.c.id,
            campaign_recipients.c.state == state.value,
        )
        .scalar_subquery()
    )


async def requeue_batches(
    conn: AsyncConnection, campaign_id: int, *, include_failed: bool, now: datetime
) -> int:
    """Finished batches back to `pending` for the next attempt: those holding a `pending`
    recipient again, and (a retry) every `failed` one. Their counts are recounted from their
    rows, so progress still shows what they settled before."""
    holds_pending = exists().where(
        campaign_recipients.c.batch_id == campaign_batches.c.id,
        campaign_recipients.c.state == RecipientState.PENDING.value,
    )
    again: list[Any] = [holds_pending]
    if include_failed:
        again.append(campaign_batches.c.status == BatchStatus.FAILED.value)
    result = await conn.execute(
        update(campaign_batches)
        .where(
            campaign_batches.c.campaign_id == campaign_id,
            campaign_batches.c.status.in_([BatchStatus.SUBMITTED.value, BatchStatus.FAILED.value]),
            or_(*again),
        )
        .values(
            status=BatchStatus.PENDING.value,
            claim_token=None,
            finished_at=None,
            error_code=None,
            error=None,
            submitted_count=_rows_in(RecipientState.SENT),
            submission_excluded_count=_rows_in(RecipientState.EXCLUDED),
            failed_count=_rows_in(RecipientState.FAILED),
            uncertain_count=_rows_in(RecipientState.UNCERTAIN),
            updated_at=now,
        )
    )
    return int(result.rowcount)
