"""`tidings bench queue`: jobs claimed and completed per second with W worker processes
(BEN-3), beside the database's own claim-only rate measured in the same run."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from tidings.bootstrap import queue_policy, utcnow
from tidings.cli.bench.queue_worker import BENCH_KIND
from tidings.config import QueueSettings
from tidings.domain.jobs import JobStatus
from tidings.queue import store
from tidings.queue.service import JobQueue
from tidings.storage import migrate
from tidings.storage.database import Database, create_database
from tidings.storage.scratch import scratch_database

ENQUEUE_CHUNK = 1000


async def _enqueue(db: Database, jobs: int, prefix: str) -> None:
    queue = JobQueue(db, queue_policy(QueueSettings()), utcnow)
    for start in range(0, jobs, ENQUEUE_CHUNK):
        async with db.write() as conn:
            for number in range(start, min(jobs, start + ENQUEUE_CHUNK)):
                await queue.enqueue(conn, BENCH_KIND, f"{prefix}-{number}", {"n": number})


async def _claim_only(db: Database, jobs: int, claimers: int) -> float:
    """Claims per second: short claim transactions (limit 1), nothing else."""
    await _enqueue(db, jobs, "claim")
    lease = queue_policy(QueueSettings()).lease
    remaining = jobs

    async def claimer() -> None:
        nonlocal remaining
        while remaining > 0:
            async with db.write() as conn:
                claimed = await store.claim(
                    conn, kinds=[BENCH_KIND], limit=1, now=utcnow(), lease=lease
                )
            if not claimed:
                return
            remaining -= len(claimed)

    started = time.perf_counter()
    await asyncio.gather(*(claimer() for _ in range(claimers)))
    return jobs / (time.perf_counter() - started)


async def _count_done(db: Database) -> int:
    async with db.read() as conn:
        return await store.count(conn, kind=BENCH_KIND, status=JobStatus.DONE)


async def _with_workers(
    db: Database, url: str, jobs: int, workers: int, concurrency: int
) -> dict[str, Any]:
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tidings.cli.bench.queue_worker",
            url,
            str(concurrency),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(workers)
    ]
    try:
        for process in processes:
            assert process.stdout is not None
            if (await process.stdout.readline()).strip() != b"ready":
                raise RuntimeError("a benchmark worker failed to start")
        started = time.perf_counter()
        await _enqueue(db, jobs, "work")
        # Completion lives in other processes' rows: polling them is the measurement.
        while await _count_done(db) < jobs:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        elapsed = time.perf_counter() - started
    finally:
        reports = []
        for process in processes:
            output, _ = await asyncio.wait_for(process.communicate(b"stop\n"), 60)
            reports.append(json.loads(output.decode().strip().splitlines()[-1]))
    return {
        "elapsed_seconds": round(elapsed, 3),
        "jobs_per_second": round(jobs / elapsed, 1),
        "handled_per_worker": [r["handled"] for r in reports],
        "worker_max_rss_mib": [r["max_rss_mib"] for r in reports],
    }


async def bench_queue(
    configured_url: str, *, jobs: int, workers: int, concurrency: int
) -> dict[str, Any]:
    async with scratch_database(configured_url) as url:
        db = create_database(url, pool_size=max(2, workers))
        try:
            await migrate.upgrade(db)
            claim_rate = await _claim_only(db, jobs, claimers=workers)
            measured = await _with_workers(db, url, jobs, workers, concurrency)
        finally:
            await db.dispose()
    return {
        "benchmark": "queue",
        "database": db.dialect,
        "jobs": jobs,
        "workers": workers,
        "concurrency_per_worker": concurrency,
        **measured,
        "claim_only_per_second": round(claim_rate, 1),
        "fraction_of_claim_only": round(measured["jobs_per_second"] / claim_rate, 3),
        "note": "enqueue time is included in elapsed_seconds; the handler does nothing",
    }
