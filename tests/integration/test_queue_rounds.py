"""A worker's round (queue/rounds.py): one statement on PostgreSQL, step by step on SQLite, the
same rows written on both (each test runs on both dialects)."""

from dataclasses import replace
from datetime import timedelta
from typing import Any

from sqlalchemy import select

from tests.support.queue_policy import policy
from tidings.bootstrap import utcnow
from tidings.queue import rounds
from tidings.queue.job import Job
from tidings.queue.rounds import Outcome
from tidings.queue.service import JobQueue
from tidings.storage.database import Database
from tidings.storage.tables import job_attempts, jobs

HOUR = 3600.0  # retried and deferred jobs are due in an hour: no round may take them again


async def _claimed_a_jobs(db: Database) -> tuple[list[Job], list[Job]]:
    """Four claimed jobs of kind `a` and three pending ones of kind `b`."""
    queue = JobQueue(db, policy(max_attempts=3), utcnow)
    async with db.write() as conn:
        for key in ("a0", "a1", "a2", "a3"):
            await queue.enqueue(conn, "a", key, {})
        pending = [(await queue.enqueue(conn, "b", key, {}))[0] for key in ("b0", "b1", "b2")]
    async with db.write() as conn:
        claimed = await rounds.claim(
            conn, kinds=["a"], limit=4, now=utcnow(), lease=timedelta(seconds=60)
        )
    return claimed, pending


def _outcomes(claimed: list[Job], pending: list[Job]) -> list[Outcome]:
    """One outcome of each kind, and one under a token that is not the job's (refused)."""
    a0, a1, a2, a3 = claimed
    return [
        Outcome(a0, "done"),
        Outcome(a1, "retry", "boom", delay_seconds=HOUR),
        Outcome(a2, "dead", "gave up"),
        Outcome(a3, "deferred", delay_seconds=HOUR),
        Outcome(replace(pending[0], claim_token="not-ours"), "done"),
    ]


async def _rows(db: Database) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The job rows and attempt rows as they can be compared across dialects."""
    soon = utcnow() + timedelta(seconds=HOUR / 2)
    async with db.read() as conn:
        job_rows = [
            (
                row.idempotency_key,
                row.status,
                row.attempts,
                row.last_error,
                row.finished_at is not None,
                row.claim_token is not None,
                row.run_at > soon,
            )
            for row in await conn.execute(select(jobs).order_by(jobs.c.idempotency_key))
        ]
        attempts = select(
            jobs.c.idempotency_key,
            job_attempts.c.attempt,
            job_attempts.c.outcome,
            job_attempts.c.error,
        ).join(jobs, jobs.c.id == job_attempts.c.job_id)
        attempt_rows = [tuple(row) for row in await conn.execute(attempts.order_by(jobs.c.id))]
    return job_rows, attempt_rows


SETTLED_A = [
    ("a0", "done", 1, None, True, False, False),
    ("a1", "pending", 1, "boom", False, False, True),
    ("a2", "dead", 1, "gave up", True, False, False),
    ("a3", "pending", 0, None, False, False, True),  # deferred: the attempt given back
]
ATTEMPTS = [("a0", 1, "done", None), ("a1", 1, "retry", "boom"), ("a2", 1, "dead", "gave up")]


async def test_settle_and_claim_writes_the_same_rows_on_both_dialects(db: Database) -> None:
    """The PostgreSQL round is one hand-written statement and SQLite's a sequence of
    queries: if they drift apart, a job is settled or claimed differently depending on the
    database, which no other test would show."""
    claimed, pending = await _claimed_a_jobs(db)
    async with db.write() as conn:
        written, taken = await rounds.settle_and_claim(
            conn,
            _outcomes(claimed, pending),
            limits={"a": 5, "b": 2, "c": 0},
            now=utcnow(),
            lease=timedelta(seconds=60),
        )
    assert written == {job.id for job in claimed}
    assert [job.idempotency_key for job in taken] == ["b0", "b1"]
    assert all(job.claim_token and job.attempts == 1 for job in taken)
    assert await _rows(db) == (
        [
            *SETTLED_A,
            ("b0", "running", 1, None, False, True, False),
            ("b1", "running", 1, None, False, True, False),
            ("b2", "pending", 0, None, False, False, False),
        ],
        ATTEMPTS,
    )


async def test_settle_writes_the_same_rows_on_both_dialects(db: Database) -> None:
    """Settling alone (the outcome writer's path) is the other pair: the same outcomes must
    leave the same rows, and claim nothing, on both databases."""
    claimed, pending = await _claimed_a_jobs(db)
    async with db.write() as conn:
        written = await rounds.settle(conn, _outcomes(claimed, pending), now=utcnow())
    assert written == {job.id for job in claimed}
    assert await _rows(db) == (
        [
            *SETTLED_A,
            ("b0", "pending", 0, None, False, False, False),
            ("b1", "pending", 0, None, False, False, False),
            ("b2", "pending", 0, None, False, False, False),
        ],
        ATTEMPTS,
    )
