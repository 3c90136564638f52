"""A worker's round on the job table: write the outcomes of the jobs it ran, each under its
claim token, and claim due jobs under fresh ones (DLV-2, DLV-3).

The one pair of the queue: on PostgreSQL the whole round is one statement (`_ROUND_STATEMENT`),
atomic alone, so it may run outside a transaction, with `FOR UPDATE SKIP LOCKED` letting many
workers claim at once; on SQLite it is done step by step inside the caller's `BEGIN IMMEDIATE`
transaction, the only writer. `settle_and_claim` and `settle` each dispatch to their
`_postgresql` / `_sqlite` pair; tests/integration/test_queue.py proves both write the same rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import func, insert, select, text, tuple_, union_all, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.jobs import JobStatus
from tidings.queue.job import Job
from tidings.queue.store import job_from, job_of, released_values
from tidings.storage.dialect import database_timestamp, is_postgresql
from tidings.storage.tables import job_attempts, jobs


async def claim(
    conn: AsyncConnection, *, kinds: list[str], limit: int, now: datetime, lease: timedelta
) -> list[Job]:
    """Claim up to `limit` due jobs of each of `kinds` (see `settle_and_claim`)."""
    _written, claimed = await settle_and_claim(
        conn, [], limits=dict.fromkeys(kinds, limit), now=now, lease=lease
    )
    return claimed


async def settle_and_claim(
    conn: AsyncConnection,
    outcomes: Sequence[Outcome],
    *,
    limits: Mapping[str, int],
    now: datetime,
    lease: timedelta,
) -> tuple[set[int], list[Job]]:
    """Write `outcomes` (see `settle`), then claim up to `limits[kind]` due jobs of each kind,
    each job under its own fresh token (each outcome is fenced separately), oldest due first.
    Returns the ids of the outcomes written and the jobs claimed.

    Due-ness and the lease are judged by the database's clock, never the caller's: `now` is
    only recorded (`updated_at`, the attempt's start). On PostgreSQL all of it is one
    statement (atomic alone, so it may run outside a transaction) and `FOR UPDATE SKIP
    LOCKED` lets many workers claim at once without blocking or double-claiming; on SQLite
    the caller's `BEGIN IMMEDIATE` transaction is the only writer, which gives the same
    guarantee. Jobs whose lease ran out are made pending again by `reap_expired`, not here.
    Commit before working."""
    limits = {kind: limit for kind, limit in limits.items() if limit > 0}
    if is_postgresql(conn):
        return await _settle_and_claim_postgresql(
            conn, outcomes, limits=limits, now=now, lease=lease
        )
    return await _settle_and_claim_sqlite(conn, outcomes, limits=limits, now=now, lease=lease)


async def _settle_and_claim_sqlite(
    conn: AsyncConnection,
    outcomes: Sequence[Outcome],
    *,
    limits: Mapping[str, int],
    now: datetime,
    lease: timedelta,
) -> tuple[set[int], list[Job]]:
    """SQLite, step by step in the caller's write transaction: settle, then claim with one
    CTE per kind, each with its own LIMIT."""
    written = await _settle_sqlite(conn, outcomes, now=now)
    if not limits:
        return written, []
    picked = [
        select(jobs.c.id)
        .where(
            jobs.c.kind == kind,
            jobs.c.status == JobStatus.PENDING.value,
            jobs.c.run_at <= database_timestamp(),
        )
        .order_by(jobs.c.run_at, jobs.c.id)
        .limit(limit)
        .cte(f"picked_{number}")
        for number, (kind, limit) in enumerate(limits.items())
    ]
    picked_ids = union_all(*(select(group.c.id) for group in picked))
    result = await conn.execute(
        update(jobs)
        .where(jobs.c.id.in_(picked_ids if len(picked) > 1 else select(picked[0].c.id)))
        .values(
            status=JobStatus.RUNNING.value,
            claim_token=func.lower(func.hex(func.randomblob(16))),
            locked_until=database_timestamp(lease.total_seconds()),
            attempts=jobs.c.attempts + 1,
            updated_at=now,
        )
        .returning(jobs)
    )
    claimed = [job_of(row) for row in result]
    claimed.sort(key=lambda job: (job.run_at, job.id))
    return written, claimed


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one claimed job, to be written under its claim token. `delay_seconds`
    (retry, deferred) is counted from the database's clock when the outcome is written."""

    job: Job
    result: Literal["done", "retry", "dead", "deferred"]
    error: str | None = None
    delay_seconds: float = 0.0


_FINISHED = {"done": JobStatus.DONE, "dead": JobStatus.DEAD}
_SETTLE_CHUNK = 500  # (id, token) pairs per statement, well inside SQLite's variable limit


async def settle(conn: AsyncConnection, outcomes: Sequence[Outcome], *, now: datetime) -> set[int]:
    """Write many jobs' outcomes, each only where the job's claim token still matches, with
    one attempt row per counted attempt, atomically. Returns the ids written; a job missing
    from it had lost its lease to another worker and nothing of it was changed.

    PostgreSQL: one statement (`_ROUND_STATEMENT`, claiming nothing; it may run outside a
    transaction). SQLite: in the caller's write transaction, successes (the common case) in
    one statement, the rest one by one."""
    if not outcomes:
        return set()
    if is_postgresql(conn):
        return await _settle_postgresql(conn, outcomes, now=now)
    return await _settle_sqlite(conn, outcomes, now=now)


async def _settle_postgresql(
    conn: AsyncConnection, outcomes: Sequence[Outcome], *, now: datetime
) -> set[int]:
    """PostgreSQL: the round's one statement, claiming nothing."""
    settled, _none = await _settle_and_claim_postgresql(
        conn, outcomes, limits={}, now=now, lease=timedelta(0)
    )
    return settled


async def _settle_sqlite(
    conn: AsyncConnection, outcomes: Sequence[Outcome], *, now: datetime
) -> set[int]:
    """SQLite: successes (the common case) in one statement per chunk, the rest one by one,
    and the attempt rows."""
    written: set[int] = set()
    done = [outcome for outcome in outcomes if outcome.result == "done"]
    for start in range(0, len(done), _SETTLE_CHUNK):
        chunk = done[start : start + _SETTLE_CHUNK]
        result = await conn.execute(
            update(jobs)
            .where(
                tuple_(jobs.c.id, jobs.c.claim_token).in_(
                    [(outcome.job.id, outcome.job.claim_token) for outcome in chunk]
                )
            )
            .values(**released_values(JobStatus.DONE, now), last_error=None, finished_at=now)
            .returning(jobs.c.id)
        )
        written.update(result.scalars())
    for outcome in outcomes:
        if outcome.result != "done" and await _settle_one(conn, outcome, now=now):
            written.add(outcome.job.id)
    attempts = [
        {
            "job_id": outcome.job.id,
            "attempt": outcome.job.attempts,
            "started_at": outcome.job.updated_at,
            "finished_at": now,
            "outcome": outcome.result,
            "error": outcome.error,
        }
        for outcome in outcomes
        if outcome.job.id in written and outcome.result != "deferred"
    ]
    if attempts:
        await conn.execute(insert(job_attempts), attempts)
    return written


# PostgreSQL's whole round in one statement. `settled` follows the rules of `_settle_one` and
# `settle`'s attempt rows; `picked` takes each kind's due jobs (a LATERAL subquery per kind,
# each with its own LIMIT, locked and skipped by other workers' claims); `claimed` gives each
# a fresh token. Data-modifying CTEs see one snapshot and touch disjoint rows (running jobs
# holding our tokens, pending ones), and the statement is atomic. One row always comes back:
# the settled ids, beside each claimed job (or none).
_ROUND_STATEMENT = text(
    """
WITH outcome AS (
    SELECT * FROM unnest(
        CAST(:ids AS bigint[]), CAST(:tokens AS text[]), CAST(:results AS text[]),
        CAST(:errors AS text[]), CAST(:delays AS float8[]), CAST(:attempts AS integer[]),
        CAST(:started AS timestamptz[])
    ) AS o(id, token, result, error, delay, attempt, started_at)
),
settled AS (
    UPDATE jobs SET
        status = CASE outcome.result
            WHEN 'done' THEN 'done' WHEN 'dead' THEN 'dead' ELSE 'pending' END,
        claim_token = NULL,
        locked_until = NULL,
        updated_at = :now,
        attempts = CASE WHEN outcome.result = 'deferred'
            THEN jobs.attempts - 1 ELSE jobs.attempts END,
        last_error = CASE WHEN outcome.result = 'deferred'
            THEN jobs.last_error ELSE outcome.error END,
        finished_at = CASE WHEN outcome.result IN ('done', 'dead')
            THEN :now ELSE jobs.finished_at END,
        run_at = CASE WHEN outcome.result IN ('retry', 'deferred')
            THEN statement_timestamp() + make_interval(secs => outcome.delay) ELSE jobs.run_at END
    FROM outcome
    WHERE jobs.id = outcome.id AND jobs.claim_token = outcome.token
    RETURNING jobs.id, outcome.result, outcome.error, outcome.attempt, outcome.started_at
),
logged AS (
    INSERT INTO job_attempts (job_id, attempt, started_at, finished_at, outcome, error)
    SELECT id, attempt, started_at, :now, result, error FROM settled WHERE result <> 'deferred'
),
picked AS MATERIALIZED (
    SELECT due.id
    FROM unnest(CAST(:kinds AS text[]), CAST(:limits AS integer[])) AS wanted(kind, slots)
    CROSS JOIN LATERAL (
        SELECT jobs.id FROM jobs
        WHERE jobs.kind = wanted.kind AND jobs.status = 'pending'
            AND jobs.run_at <= statement_timestamp()
        ORDER BY jobs.run_at, jobs.id
        LIMIT wanted.slots
        FOR UPDATE SKIP LOCKED
    ) AS due
),
claimed AS (
    UPDATE jobs SET
        status = 'running',
        claim_token = replace(CAST(gen_random_uuid() AS text), '-', ''),
        locked_until = statement_timestamp() + make_interval(secs => :lease_seconds),
        attempts = jobs.attempts + 1,
        updated_at = :now
    WHERE jobs.id IN (SELECT id FROM picked)
    RETURNING jobs.*
)
SELECT settled_ids.ids AS settled_ids, claimed.*
FROM (SELECT array_agg(id) AS ids FROM settled) AS settled_ids
LEFT JOIN claimed ON true
"""
)


async def _settle_and_claim_postgresql(
    conn: AsyncConnection,
    outcomes: Sequence[Outcome],
    *,
    limits: Mapping[str, int],
    now: datetime,
    lease: timedelta,
) -> tuple[set[int], list[Job]]:
    rows = (
        await conn.execute(
            _ROUND_STATEMENT,
            {
                "ids": [outcome.job.id for outcome in outcomes],
                "tokens": [outcome.job.claim_token for outcome in outcomes],
                "results": [outcome.result for outcome in outcomes],
                "errors": [outcome.error for outcome in outcomes],
                "delays": [float(outcome.delay_seconds) for outcome in outcomes],
                "attempts": [outcome.job.attempts for outcome in outcomes],
                "started": [outcome.job.updated_at for outcome in outcomes],
                "kinds": list(limits),
                "limits": list(limits.values()),
                "lease_seconds": lease.total_seconds(),
                "now": now,
            },
        )
    ).all()
    written = {int(job_id) for job_id in rows[0].settled_ids or ()}
    claimed = [
        job_from({key: value for key, value in row._mapping.items() if key != "settled_ids"})
        for row in rows
        if row.id is not None
    ]
    claimed.sort(key=lambda job: (job.run_at, job.id))
    return written, claimed


async def _settle_one(conn: AsyncConnection, outcome: Outcome, *, now: datetime) -> bool:
    job = outcome.job
    if outcome.result in _FINISHED:
        values = {
            **released_values(_FINISHED[outcome.result], now),
            "last_error": outcome.error,
            "finished_at": now,
        }
    else:
        values = {
            **released_values(JobStatus.PENDING, now),
            "run_at": database_timestamp(outcome.delay_seconds),
        }
        if outcome.result == "retry":
            values["last_error"] = outcome.error
        else:  # deferred: the claim is given back unspent, the attempt not counted
            values["attempts"] = jobs.c.attempts - 1
    result = await conn.execute(
        update(jobs)
        .where(jobs.c.id == job.id, jobs.c.claim_token == job.claim_token)
        .values(**values)
    )
    return result.rowcount == 1


async def complete(conn: AsyncConnection, job: Job, *, now: datetime) -> bool:
    return job.id in await settle(conn, [Outcome(job, "done")], now=now)


async def bury(conn: AsyncConnection, job: Job, *, now: datetime, error: str) -> bool:
    return job.id in await settle(conn, [Outcome(job, "dead", error)], now=now)
