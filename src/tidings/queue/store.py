"""Named queries on the job table: enqueue, reap, renew, hold, replay, prune, read (DLV-1..4);
a worker's round, settling outcomes and claiming jobs, is `queue/rounds.py`.

Every outcome is written only where the claim token still matches: a worker that overran its
lease, whose job another worker reclaimed, has its late write refused (the fencing token).
Leases and due times are judged by the database's clock (`database_timestamp`), so a worker
machine with a wrong clock cannot take a live job or start a scheduled one early; the `now`
passed in by callers is only recorded (created, updated, finished times).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Select,
    delete,
    func,
    literal,
    or_,
    select,
    text,
    true,
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


def job_of(row: Any) -> Job:
    """The `Job` of a row of the job table."""
    return job_from(dict(row._mapping))


def job_from(values: dict[str, Any]) -> Job:
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
        return job_of(row), True
    existing = await conn.execute(select(jobs).where(jobs.c.idempotency_key == idempotency_key))
    return job_of(existing.one()), False


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


def released_values(status: JobStatus, now: datetime) -> dict[str, Any]:
    """The values that give a job's claim back, leaving it in `status`."""
    return {"status": status.value, "claim_token": None, "locked_until": None, "updated_at": now}


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
            **released_values(JobStatus.DEAD, now),
            finished_at=now,
            last_error="lease expired on the final attempt (worker lost)",
        )
        .returning(jobs.c.id)  # counted from rows: SQLite reports no rowcount after WITH
    )
    released = await conn.execute(
        update(jobs)
        .where(expired())
        .values(**released_values(JobStatus.PENDING, now))
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
    return None if row is None else job_of(row)


async def get_by_key(conn: AsyncConnection, idempotency_key: str) -> Job | None:
    query = select(jobs).where(jobs.c.idempotency_key == idempotency_key)
    row = (await conn.execute(query)).first()
    return None if row is None else job_of(row)


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
    return [job_of(row) for row in await conn.execute(query)]


async def upcoming(conn: AsyncConnection, *, limit: int) -> list[Job]:
    """Jobs waiting for their time or running, the next due first (a scheduled send is one)."""
    query = (
        select(jobs)
        .where(jobs.c.status.in_([JobStatus.PENDING.value, JobStatus.RUNNING.value]))
        .order_by(jobs.c.run_at, jobs.c.id)
        .limit(limit)
    )
    return [job_of(row) for row in await conn.execute(query)]


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
    return None if row is None else job_of(row)


async def withdraw(conn: AsyncConnection, *, idempotency_key: str) -> int:
    """Delete the job with this key if it is still `pending` (waiting for its time): work
    called off before it started leaves nothing queued behind. A running job is left to its
    worker, whose handler finds the work called off; a finished one is history. Returns how
    many jobs were removed (0 or 1)."""
    waiting = select(jobs.c.id).where(
        jobs.c.idempotency_key == idempotency_key, jobs.c.status == JobStatus.PENDING.value
    )
    await conn.execute(delete(job_attempts).where(job_attempts.c.job_id.in_(waiting)))
    return int((await conn.execute(delete(jobs).where(jobs.c.id.in_(waiting)))).rowcount)


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
