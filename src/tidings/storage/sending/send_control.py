"""Named queries for closing a cancelled send (SND-23): recipients never handed over become
`cancelled`, batch by batch, and what a worker that died may have handed over stays
`uncertain` for an operator (PRI-2). Run only while no live worker holds a batch."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.sending import BatchStatus, RecipientState
from tidings.storage.sending.batch_claims import claim_is_live
from tidings.storage.tables import campaign_batches, campaign_recipients, jobs

CANCELLED_REASON = "send_cancelled"
IN_FLIGHT_AT_CANCEL = "in_flight_at_crash"


def _claimed(campaign_id: int) -> Any:
    """Batches a worker claimed and did not finish (no recorded uncertainty)."""
    return and_(
        campaign_batches.c.campaign_id == campaign_id,
        campaign_batches.c.status == BatchStatus.SUBMITTING.value,
        campaign_batches.c.error_code.is_(None),
    )


async def live_claims(conn: AsyncConnection, campaign_id: int) -> int:
    """Batches a running worker still holds: it stops at its next chunk and gives them back."""
    query = (
        select(func.count())
        .select_from(campaign_batches)
        .where(_claimed(campaign_id), claim_is_live(campaign_batches.c.claim_token))
    )
    return int((await conn.execute(query)).scalar_one())


async def close_stale_claims(conn: AsyncConnection, campaign_id: int, *, now: datetime) -> int:
    """Batches whose worker died mid-send: what it had in flight (its `sending` rows, or every
    `pending` one once a batch call was handed over) becomes `uncertain` and the batch awaits a
    reconcile; the rest were never handed over. Returns the recipients made uncertain."""
    stale = (
        await conn.execute(
            select(campaign_batches.c.id, campaign_batches.c.handed_over_at).where(
                _claimed(campaign_id), ~claim_is_live(campaign_batches.c.claim_token)
            )
        )
    ).all()
    uncertain = 0
    for batch_id, handed_over_at in stale:
        in_flight = [RecipientState.SENDING.value]
        if handed_over_at is not None:
            in_flight.append(RecipientState.PENDING.value)
        moved = await conn.execute(
            update(campaign_recipients)
            .where(
                campaign_recipients.c.batch_id == batch_id,
                campaign_recipients.c.state.in_(in_flight),
            )
            .values(
                state=RecipientState.UNCERTAIN.value, reason=IN_FLIGHT_AT_CANCEL, updated_at=now
            )
        )
        uncertain += int(moved.rowcount)
        if moved.rowcount:
            await conn.execute(
                update(campaign_batches)
                .where(campaign_batches.c.id == batch_id)
                .values(
                    error_code="batch_outcome_uncertain",
                    error="The worker sending this batch stopped after the request may have "
                    "reached the provider; the send was then cancelled. Reconcile it.",
                    updated_at=now,
                )
            )
        else:  # nothing was in flight: the batch is given back, and cancelled below
            await conn.execute(
                update(campaign_batches)
                .where(campaign_batches.c.id == batch_id)
                .values(status=BatchStatus.PENDING.value, claim_token=None, updated_at=now)
            )
    return uncertain


async def cancel_unsent(conn: AsyncConnection, campaign_id: int, *, now: datetime) -> int:
    """Every batch not handed over (`pending`) and its `pending` recipients become
    `cancelled`; also the `pending` rows of a batch awaiting a reconcile (never handed over:
    a per-recipient batch's unsent recipients). Returns the recipients cancelled."""
    pending_batches = select(campaign_batches.c.id).where(
        campaign_batches.c.campaign_id == campaign_id,
        campaign_batches.c.status == BatchStatus.PENDING.value,
    )
    reconcilable = select(campaign_batches.c.id).where(
        campaign_batches.c.campaign_id == campaign_id,
        campaign_batches.c.status == BatchStatus.SUBMITTING.value,
        campaign_batches.c.handed_over_at.is_(None),
    )
    moved = await conn.execute(
        update(campaign_recipients)
        .where(
            campaign_recipients.c.campaign_id == campaign_id,
            campaign_recipients.c.state == RecipientState.PENDING.value,
            or_(
                campaign_recipients.c.batch_id.in_(pending_batches),
                campaign_recipients.c.batch_id.in_(reconcilable),
            ),
        )
        .values(state=RecipientState.CANCELLED.value, reason=CANCELLED_REASON, updated_at=now)
    )
    await conn.execute(
        update(campaign_batches)
        .where(
            campaign_batches.c.campaign_id == campaign_id,
            campaign_batches.c.status == BatchStatus.PENDING.value,
        )
        .values(
            status=BatchStatus.CANCELLED.value,
            claim_token=None,
            finished_at=now,
            updated_at=now,
        )
    )
    return int(moved.rowcount)


class JobTrouble(NamedTuple):
    last_error: str
    attempts: int
    max_attempts: int
    run_at: datetime


async def batch_job_trouble(
    conn: AsyncConnection, campaign_id: int, attempt: int
) -> JobTrouble | None:
    """The attempt's batch job that failed most recently and waits to be tried again (SND-26):
    its last error, how many tries it had and when the next is due."""
    query = (
        select(jobs.c.last_error, jobs.c.attempts, jobs.c.max_attempts, jobs.c.run_at)
        .where(
            jobs.c.kind == "send_batch",
            jobs.c.idempotency_key.like(f"send_batch:{campaign_id}:%:{attempt}"),
            jobs.c.status == "pending",
            jobs.c.attempts > 0,
            jobs.c.last_error.is_not(None),
        )
        .order_by(jobs.c.updated_at.desc(), jobs.c.id.desc())
        .limit(1)
    )
    row = (await conn.execute(query)).first()
    return None if row is None else JobTrouble(*row)
