"""Named queries on the job table: enqueue, claim, settle, replay, prune (DLV-1..4).

Every outcome is written only where the claim token still matches: a worker that overran its
lease, whose job another worker reclaimed, has its late write refused (the fencing token).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, and_, delete, func, insert, literal, or_, select, text, true, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.jobs import JobStatus
from tidings.queue.job import Job
from tidings.storage.tables import job_attempts, jobs
from tidings.storage.upsert import insert_for

NOTIFY_CHANNEL = "tidings_jobs"


def _job(row: Any) -> Job:
    values = dict(row._mapping)
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
        "run_at": run_at or now,
        "created_at": now,
        "updated_at": now,
    }
    dialect = conn.dialect.name
    statement = insert_for(conn, jobs).values(values)
    if revive:
        statement = statement.on_conflict_do_update(
            index_elements=["idempotency_key"],
            set_=_due_again(now, run_at or now),
            where=jobs.c.status.in_([JobStatus.DONE.value, JobStatus.DEAD.value]),
        )
    else:
        statement = statement.on_conflict_do_nothing(index_elements=["idempotency_key"])
    inserted = await conn.execute(statement.returning(jobs))
    row = inserted.first()
    if row is not None:
        if dialect == "postgresql":  # delivered at commit, so listeners never see uncommitted work
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
    build = func.jsonb_build_object if conn.dialect.name == "postgresql" else func.json_object
    jobs_to_add = select(
        literal(kind),
        source.c.idempotency_key,
        build(*(part for field in fields for part in field)),
        literal(JobStatus.PENDING.value),
        literal(0),
        literal(max_attempts),
        *(literal(now, jobs.c.created_at.type) for _ in range(3)),
    ).where(true())  # SQLite needs a WHERE before ON CONFLICT in INSERT ... SELECT
    columns = ["kind", "idempotency_key", "payload", "status", "attempts", "max_attempts"]
    statement = (
        insert_for(conn, jobs)
        .from_select([*columns, "run_at", "created_at", "updated_at"], jobs_to_add)
        .on_conflict_do_nothing(index_elements=["idempotency_key"])
    )
    added = int((await conn.execute(statement)).rowcount)
    if added and conn.dialect.name == "postgresql":
        await conn.execute(
            text("SELECT pg_notify(:channel, :kind)"), {"channel": NOTIFY_CHANNEL, "kind": kind}
        )
    return added


def _due_again(now: datetime, run_at: datetime) -> dict[str, Any]:
    """The values that make a finished job due again with a fresh attempt budget."""
    return {
        "status": JobStatus.PENDING.value,
        "attempts": 0,
        "run_at": run_at,
        "finished_at": None,
        "updated_at": now,
    }


def _claimable(now: datetime) -> Any:
    return or_(
        and_(jobs.c.status == JobStatus.PENDING.value, jobs.c.run_at <= now),
        and_(jobs.c.status == JobStatus.RUNNING.value, jobs.c.locked_until < now),
    )


async def claim(
    conn: AsyncConnection, *, kinds: list[str], limit: int, now: datetime, lease: timedelta
) -> list[Job]:
    """Claim up to `limit` due jobs (or jobs whose lease expired) under a fresh token each.

    On PostgreSQL `FOR UPDATE SKIP LOCKED` lets many workers claim at once without blocking or
    double-claiming; on SQLite the caller's `BEGIN IMMEDIATE` transaction is the only writer,
    which gives the same guarantee (the clause is not rendered there). Commit before working.
    """
    await bury_abandoned(conn, kinds=kinds, now=now)
    candidates = (
        select(jobs.c.id)
        .where(jobs.c.kind.in_(kinds), _claimable(now))
        .order_by(jobs.c.run_at, jobs.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    ids = list((await conn.execute(candidates)).scalars())
    claimed = []
    for job_id in ids:  # one token per job: each outcome is fenced separately
        result = await conn.execute(
            update(jobs)
            .where(jobs.c.id == job_id)
            .values(
                status=JobStatus.RUNNING.value,
                claim_token=secrets.token_hex(16),
                locked_until=now + lease,
                attempts=jobs.c.attempts + 1,
                updated_at=now,
            )
            .returning(jobs)
        )
        claimed.append(_job(result.one()))
    return claimed


async def _settle(
    conn: AsyncConnection,
    job: Job,
    *,
    status: JobStatus,
    outcome: str,
    now: datetime,
    error: str | None,
    run_at: datetime | None = None,
) -> bool:
    values: dict[str, Any] = {
        "status": status.value,
        "claim_token": None,
        "locked_until": None,
        "updated_at": now,
        "last_error": error,
    }
    if status in (JobStatus.DONE, JobStatus.DEAD):
        values["finished_at"] = now
    if run_at is not None:
        values["run_at"] = run_at
    result = await conn.execute(
        update(jobs)
        .where(jobs.c.id == job.id, jobs.c.claim_token == job.claim_token)
        .values(**values)
    )
    if result.rowcount != 1:
        return False  # the lease was lost and another worker owns the job now
    await conn.execute(
        insert(job_attempts).values(
            job_id=job.id,
            attempt=job.attempts,
            started_at=job.updated_at,
            finished_at=now,
            outcome=outcome,
            error=error,
        )
    )
    return True


async def complete(conn: AsyncConnection, job: Job, *, now: datetime) -> bool:
    return await _settle(conn, job, status=JobStatus.DONE, outcome="done", now=now, error=None)


async def retry(
    conn: AsyncConnection, job: Job, *, now: datetime, run_at: datetime, error: str
) -> bool:
    return await _settle(
        conn, job, status=JobStatus.PENDING, outcome="retry", now=now, error=error, run_at=run_at
    )


async def bury(conn: AsyncConnection, job: Job, *, now: datetime, error: str) -> bool:
    return await _settle(conn, job, status=JobStatus.DEAD, outcome="dead", now=now, error=error)


async def defer(conn: AsyncConnection, job: Job, *, now: datetime, run_at: datetime) -> bool:
    """Give the claim back unspent: due again at `run_at`, the attempt not counted."""
    result = await conn.execute(
        update(jobs)
        .where(jobs.c.id == job.id, jobs.c.claim_token == job.claim_token)
        .values(
            status=JobStatus.PENDING.value,
            claim_token=None,
            locked_until=None,
            attempts=jobs.c.attempts - 1,
            run_at=run_at,
            updated_at=now,
        )
    )
    return result.rowcount == 1


async def bury_abandoned(conn: AsyncConnection, *, kinds: list[str], now: datetime) -> int:
    """Jobs whose lease ran out on their last attempt are dead, not reclaimed: a job that
    kills its worker every time (out of memory, a crash) must not loop forever."""
    result = await conn.execute(
        update(jobs)
        .where(
            jobs.c.kind.in_(kinds),
            jobs.c.status == JobStatus.RUNNING.value,
            jobs.c.locked_until < now,
            jobs.c.attempts >= jobs.c.max_attempts,
        )
        .values(
            status=JobStatus.DEAD.value,
            claim_token=None,
            locked_until=None,
            finished_at=now,
            updated_at=now,
            last_error="lease expired on the final attempt (worker lost)",
        )
    )
    return int(result.rowcount)


async def extend_lease(conn: AsyncConnection, job: Job, *, now: datetime, lease: timedelta) -> bool:
    """Renew a live worker's lease; False when the job is no longer ours."""
    result = await conn.execute(
        update(jobs)
        .where(jobs.c.id == job.id, jobs.c.claim_token == job.claim_token)
        .values(locked_until=now + lease, updated_at=now)
    )
    return result.rowcount == 1


async def hold(conn: AsyncConnection, job: Job) -> bool:
    """Inside a write transaction: confirm `job`'s claim is still ours and keep it ours until
    commit. On PostgreSQL a shared row lock (FOR SHARE): a reclaim, which locks the row for
    update, waits or skips it, while the job's own fenced transactions (preparation pages
    written side by side) do not wait for each other. On SQLite the single writer does it.
    False when another worker reclaimed the job: the caller must write nothing."""
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
    A running job counts whatever its lease says: the claim loop reclaims or buries it."""
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
        .values(**_due_again(now, now))
        .returning(jobs)
    )
    row = result.first()
    if row is not None and conn.dialect.name == "postgresql":
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
