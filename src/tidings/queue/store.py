"""Named queries on the job table: enqueue, claim, settle, reap, replay, prune (DLV-1..4).

Every outcome is written only where the claim token still matches: a worker that overran its
lease, whose job another worker reclaimed, has its late write refused (the fencing token).
Leases and due times are judged by the database's clock (`database_timestamp`), so a worker
machine with a wrong clock cannot take a live job or start a scheduled one early; the `now`
passed in by callers is only recorded (created, updated, finished times).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import (
    Select,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    true,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.jobs import JobStatus
from tidings.queue.job import Job
from tidings.storage.dialect import (
    database_timestamp,
    insert_for,
    is_postgresql,
    json_object_builder,
)
from tidings.storage.tables import job_attempts, jobs

NOTIFY_CHANNEL = "tidings_jobs"


def _job(row: Any) -> Job:
    return _job_from(dict(row._mapping))


def _job_from(values: dict[str, Any]) -> Job:
    values["status"] = JobStatus(values["status"])
    return Job(**values)


async def enqueue(
    conn: AsyncConnection,
    *,
    kind: str,
    idempotency_key: str,
    payload: dict[str, Any],
    now: datetime,
    max_attempts: int,
    run_at: datetime | None = None,
    revive: bool = False,
) -> tuple[Job, bool]:
    """Add a job in the caller's transaction (the outbox). Returns (job, created): a second
    enqueue with the same idempotency key changes nothing and returns the existing job.

    With `revive`, an existing job with that key that has finished (`done` or `dead`) is made
    due again instead, with a fresh attempt budget — the same row, its history kept, exactly
    as `replay` does; `created` is then True too. A pending or running job is left alone."""
    values = {
        "kind": kind,
        "idempotency_key": idempotency_key,
        "payload": payload,
        "status": JobStatus.PENDING.value,
        "attempts": 0,
        "max_attempts": max_attempts,
        "run_at": run_at or database_timestamp(),
        "created_at": now,
        "updated_at": now,
    }
    statement = insert_for(conn, jobs).values(values)
    if revive:
        statement = statement.on_conflict_do_update(
            index_elements=["idempotency_key"],
            set_=_due_again(now, run_at),
            where=jobs.c.status.in_([JobStatus.DONE.value, JobStatus.DEAD.value]),
        )
    else:
        statement = statement.on_conflict_do_nothing(index_elements=["idempotency_key"])
    inserted = await conn.execute(statement.returning(jobs))
    row = inserted.first()
    if row is not None:
        if is_postgresql(conn):  # delivered at commit, so listeners never see uncommitted work
            await conn.execute(
                text("SELECT pg_notify(:channel, :kind)"), {"channel": NOTIFY_CHANNEL, "kind": kind}
            )
        return _job(row), True
    existing = await conn.execute(select(jobs).where(jobs.c.idempotency_key == idempotency_key))
    return _job(existing.one()), False


async def enqueue_many(
    conn: AsyncConnection, *, kind: str, rows: Select[Any], now: datetime, max_attempts: int
) -> int:
    """Add a job per row of `rows` in the caller's transaction, in one INSERT ... SELECT (the
    outbox for bulk work: an import's thousand webhook deliveries per chunk). The column
    labelled `idempotency_key` is each job's key; every other column becomes a field of its
    payload, under the column's label. A key already queued is skipped, as with `enqueue`.
    Returns how many jobs were added."""
    source = rows.subquery("due")
    fields = [(literal(c.key), c) for c in source.c if c.key != "idempotency_key"]
    build = json_object_builder(conn)
    jobs_to_add = select(
        literal(kind),
        source.c.idempotency_key,
        build(*(part for field in fields for part in field)),
        literal(JobStatus.PENDING.value),
        literal(0),
        literal(max_attempts),
        database_timestamp(),  # due at once, by the database's clock (DLV-2)
        *(literal(now, jobs.c.created_at.type) for _ in range(2)),
    ).where(true())  # SQLite needs a WHERE before ON CONFLICT in INSERT ... SELECT
    columns = ["kind", "idempotency_key", "payload", "status", "attempts", "max_attempts"]
    statement = (
        insert_for(conn, jobs)
        .from_select([*columns, "run_at", "created_at", "updated_at"], jobs_to_add)
        .on_conflict_do_nothing(index_elements=["idempotency_key"])
    )
    added = int((await conn.execute(statement)).rowcount)
    if added and is_postgresql(conn):
        await conn.execute(
            text("SELECT pg_notify(:channel, :kind)"), {"channel": NOTIFY_CHANNEL, "kind": kind}
        )
    return added


def _due_again(now: datetime, run_at: datetime | None) -> dict[str, Any]:
    """The values that make a finished job due again with a fresh attempt budget; without an
    explicit `run_at` it is due at once, by the database's clock."""
    return {
        "status": JobStatus.PENDING.value,
        "attempts": 0,
        "run_at": run_at or database_timestamp(),
        "finished_at": None,
        "updated_at": now,
    }


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
        return await _settle_and_claim_in_one_statement(
            conn, outcomes, limits=limits, now=now, lease=lease
        )
    written = await settle(conn, outcomes, now=now)
    return written, await _claim(conn, limits, now=now, lease=lease)


async def _claim(
    conn: AsyncConnection, limits: Mapping[str, int], *, now: datetime, lease: timedelta
) -> list[Job]:
    """The claim as SQLite runs it: one CTE per kind, each with its own LIMIT."""
    if not limits:
        return []
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
    claimed = [_job(row) for row in result]
    claimed.sort(key=lambda job: (job.run_at, job.id))
    return claimed


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
        settled, _none = await _settle_and_claim_in_one_statement(
            conn, outcomes, limits={}, now=now, lease=timedelta(0)
        )
        return settled
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
            .values(**_released(JobStatus.DONE, now), last_error=None, finished_at=now)
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


async def _settle_and_claim_in_one_statement(
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
        _job_from({key: value for key, value in row._mapping.items() if key != "settled_ids"})
        for row in rows
        if row.id is not None
    ]
    claimed.sort(key=lambda job: (job.run_at, job.id))
    return written, claimed


def _released(status: JobStatus, now: datetime) -> dict[str, Any]:
    return {"status": status.value, "claim_token": None, "locked_until": None, "updated_at": now}


async def _settle_one(conn: AsyncConnection, outcome: Outcome, *, now: datetime) -> bool:
    job = outcome.job
    if outcome.result in _FINISHED:
        values = {
            **_released(_FINISHED[outcome.result], now),
            "last_error": outcome.error,
            "finished_at": now,
        }
    else:
        values = {
            **_released(JobStatus.PENDING, now),
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


async def reap_expired(conn: AsyncConnection, *, kinds: list[str], now: datetime) -> int:
    """Running jobs whose lease ran out, by the database's clock: their worker is gone or
    stuck. On their last attempt they are dead, not run again (a job that kills its worker
    every time — out of memory, a crash — must not loop forever); otherwise they are due
    again at once and the next claim takes them under a new token, which fences off any late
    write of the old worker. Rows another transaction holds (a fenced write, a renewal) are
    skipped, not waited for. Returns how many jobs it changed."""

    def expired(*conditions: Any) -> Any:
        ids = (
            select(jobs.c.id)
            .where(
                jobs.c.kind.in_(kinds),
                jobs.c.status == JobStatus.RUNNING.value,
                jobs.c.locked_until < database_timestamp(),
                *conditions,
            )
            .with_for_update(skip_locked=True)
            .cte("expired")
            .prefix_with("MATERIALIZED", dialect="postgresql")
        )
        return jobs.c.id.in_(select(ids.c.id))

    buried = await conn.execute(
        update(jobs)
        .where(expired(jobs.c.attempts >= jobs.c.max_attempts))
        .values(
            **_released(JobStatus.DEAD, now),
            finished_at=now,
            last_error="lease expired on the final attempt (worker lost)",
        )
        .returning(jobs.c.id)  # counted from rows: SQLite reports no rowcount after WITH
    )
    released = await conn.execute(
        update(jobs)
        .where(expired())
        .values(**_released(JobStatus.PENDING, now))
        .returning(jobs.c.id)
    )
    return len(buried.all()) + len(released.all())


async def extend_lease(conn: AsyncConnection, job: Job, *, now: datetime, lease: timedelta) -> bool:
    """Renew a live worker's lease, to `lease` from the database's clock; False when the job
    is no longer ours."""
    result = await conn.execute(
        update(jobs)
        .where(
            jobs.c.id == job.id,
            jobs.c.claim_token == job.claim_token,
            jobs.c.status == JobStatus.RUNNING.value,
        )
        .values(locked_until=database_timestamp(lease.total_seconds()), updated_at=now)
    )
    return result.rowcount == 1


async def hold(conn: AsyncConnection, job: Job) -> bool:
    """Inside a write transaction: confirm `job`'s claim is still ours and keep it ours until
    commit. On PostgreSQL a shared row lock (FOR SHARE): the reaper, which locks rows for
    update, skips it, while the job's own fenced transactions (preparation pages written side
    by side) do not wait for each other. On SQLite the single writer does it. False when
    another worker reclaimed the job: the caller must write nothing."""
    held = await conn.execute(
        select(jobs.c.id)
        .where(
            jobs.c.id == job.id,
            jobs.c.claim_token == job.claim_token,
            jobs.c.status == JobStatus.RUNNING.value,
        )
        .with_for_update(read=True)
    )
    return held.first() is not None


async def live_keys(
    conn: AsyncConnection, *, kinds: Sequence[str], key_patterns: Sequence[str]
) -> list[str]:
    """Idempotency keys of the pending or running jobs of `kinds` whose key matches one of
    `key_patterns`, where `%` stands for any run of characters (everything else is literal).
    A running job counts whatever its lease says: the reaper releases or buries it."""
    if not key_patterns:
        return []
    query = select(jobs.c.idempotency_key).where(
        jobs.c.status.in_([JobStatus.PENDING.value, JobStatus.RUNNING.value]),
        jobs.c.kind.in_(list(kinds)),
        or_(*(jobs.c.idempotency_key.like(_literal(p), escape="\\") for p in key_patterns)),
    )
    return [str(key) for key in (await conn.execute(query)).scalars()]


def _literal(pattern: str) -> str:
    """Escape LIKE's single-character wildcard and the escape itself; `%` stays a wildcard."""
    return pattern.replace("\\", "\\\\").replace("_", "\\_")


async def get(conn: AsyncConnection, job_id: int) -> Job | None:
    row = (await conn.execute(select(jobs).where(jobs.c.id == job_id))).first()
    return None if row is None else _job(row)


async def get_by_key(conn: AsyncConnection, idempotency_key: str) -> Job | None:
    query = select(jobs).where(jobs.c.idempotency_key == idempotency_key)
    row = (await conn.execute(query)).first()
    return None if row is None else _job(row)


async def list_jobs(
    conn: AsyncConnection,
    *,
    status: JobStatus | None,
    kind: str | None,
    before_id: int | None,
    limit: int,
) -> list[Job]:
    query = select(jobs).order_by(jobs.c.id.desc()).limit(limit)
    if status is not None:
        query = query.where(jobs.c.status == status.value)
    if kind is not None:
        query = query.where(jobs.c.kind == kind)
    if before_id is not None:
        query = query.where(jobs.c.id < before_id)
    return [_job(row) for row in await conn.execute(query)]


async def attempts_of(conn: AsyncConnection, job_id: int) -> list[dict[str, Any]]:
    query = (
        select(job_attempts)
        .where(job_attempts.c.job_id == job_id)
        .order_by(job_attempts.c.attempt, job_attempts.c.id)
    )
    return [dict(row._mapping) for row in await conn.execute(query)]


async def replay(conn: AsyncConnection, job_id: int, *, now: datetime) -> Job | None:
    """Make a dead (or done) job due again with a fresh attempt budget. Running jobs are left
    alone: replaying one would let two workers hold it."""
    result = await conn.execute(
        update(jobs)
        .where(jobs.c.id == job_id, jobs.c.status != JobStatus.RUNNING.value)
        .values(**_due_again(now, None))
        .returning(jobs)
    )
    row = result.first()
    if row is not None and is_postgresql(conn):
        await conn.execute(
            text("SELECT pg_notify(:channel, :kind)"), {"channel": NOTIFY_CHANNEL, "kind": row.kind}
        )
    return None if row is None else _job(row)


async def prune(conn: AsyncConnection, *, finished_before: datetime, batch: int) -> int:
    """Delete up to `batch` finished (done) jobs and old attempts; returns rows removed.
    Dead jobs stay until an admin replays or they are pruned with the same age rule."""
    old_jobs = (
        select(jobs.c.id)
        .where(
            jobs.c.status.in_([JobStatus.DONE.value, JobStatus.DEAD.value]),
            jobs.c.finished_at < finished_before,
        )
        .limit(batch)
    )
    removed = (await conn.execute(delete(jobs).where(jobs.c.id.in_(old_jobs)))).rowcount
    old_attempts = (
        select(job_attempts.c.id).where(job_attempts.c.finished_at < finished_before).limit(batch)
    )
    removed += (
        await conn.execute(delete(job_attempts).where(job_attempts.c.id.in_(old_attempts)))
    ).rowcount
    return int(removed)


async def count(conn: AsyncConnection, *, kind: str, status: JobStatus) -> int:
    query = select(func.count()).where(jobs.c.kind == kind, jobs.c.status == status.value)
    return int((await conn.execute(query)).scalar_one())


async def count_unfinished(conn: AsyncConnection, *, kinds: Sequence[str]) -> int:
    """Pending and running jobs of `kinds` (what a drain still has to do)."""
    query = select(func.count()).where(
        jobs.c.kind.in_(list(kinds)),
        jobs.c.status.in_([JobStatus.PENDING.value, JobStatus.RUNNING.value]),
    )
    return int((await conn.execute(query)).scalar_one())


async def depth_by_kind_and_status(
    conn: AsyncConnection, *, now: datetime
) -> list[tuple[str, str, int, float]]:
    """(kind, status, count, age in seconds of the oldest due job) for the queue metrics."""
    query = (
        select(jobs.c.kind, jobs.c.status, func.count(), func.min(jobs.c.run_at))
        .where(
            jobs.c.status.in_(
                [JobStatus.PENDING.value, JobStatus.RUNNING.value, JobStatus.DEAD.value]
            )
        )
        .group_by(jobs.c.kind, jobs.c.status)
    )
    rows = []
    for kind, status, count, oldest in await conn.execute(query):
        age = 0.0
        if oldest is not None:
            if isinstance(oldest, str):
                oldest = datetime.fromisoformat(oldest)
            if oldest.tzinfo is None:
                oldest = oldest.replace(tzinfo=now.tzinfo)
            age = max(0.0, (now - oldest).total_seconds())
        rows.append((kind, status, int(count), age))
    return rows
