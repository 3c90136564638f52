"""`tidings bench queue`: how fast W worker processes drain jobs enqueued beforehand (BEN-3),
how fast jobs are enqueued (one per transaction and many per transaction, timed apart), and
how soon an idle worker starts a new job; beside PgQueuer doing the same in the same run on
the same PostgreSQL server when it is installed (the `bench` extra)."""

from __future__ import annotations

import importlib.util
import sys
import time
from typing import Any

from tidings.bench.processes import BENCH_KIND, PING_KIND, run_benchmark_workers
from tidings.bench.scratch import scratch_database
from tidings.bootstrap import queue_policy, utcnow
from tidings.config import QueueSettings
from tidings.queue.service import JobQueue
from tidings.storage import migrate
from tidings.storage.database import Database, create_database, libpq_url

ENQUEUE_CHUNK = 1000  # jobs per transaction in the batch enqueue
SINGLE_ENQUEUES = 500  # jobs enqueued one per transaction (at most; part of the drained jobs)


def pgqueuer_installed() -> bool:
    return importlib.util.find_spec("pgqueuer") is not None


async def _enqueue_timed(queue: JobQueue, jobs: int) -> dict[str, float]:
    """Enqueue `jobs` no-op jobs: the first ones one per transaction, the rest in chunks."""
    db = queue.db
    single = min(jobs, SINGLE_ENQUEUES)
    started = time.perf_counter()
    for number in range(single):
        async with db.write() as conn:
            await queue.enqueue(conn, BENCH_KIND, f"work-{number}", {"n": number})
    single_seconds = time.perf_counter() - started
    started = time.perf_counter()
    for start in range(single, jobs, ENQUEUE_CHUNK):
        async with db.write() as conn:
            for number in range(start, min(jobs, start + ENQUEUE_CHUNK)):
                await queue.enqueue(conn, BENCH_KIND, f"work-{number}", {"n": number})
    batch_seconds = time.perf_counter() - started
    figures = {"single_per_second": round(single / single_seconds, 1)}
    if jobs > single:
        figures["batch_per_second"] = round((jobs - single) / batch_seconds, 1)
        figures["batch_jobs_per_transaction"] = ENQUEUE_CHUNK
    return figures


async def _tidings(
    url: str, db: Database, jobs: int, workers: int, concurrency: int, probes: int
) -> Any:
    queue = JobQueue(db, queue_policy(QueueSettings()), utcnow)
    enqueue = await _enqueue_timed(queue, jobs)

    async def queue_empty() -> bool:
        return await queue.unfinished([BENCH_KIND, PING_KIND]) == 0

    async def send_probe(number: int) -> None:
        async with db.write() as conn:
            await queue.enqueue(conn, PING_KIND, f"ping-{number}", {"n": number})

    command = [sys.executable, "-m", "tidings.bench.queue_worker", url, str(concurrency)]
    measured = await run_benchmark_workers(
        [command] * workers, queue_empty=queue_empty, send_probe=send_probe, probes=probes
    )
    return {
        "jobs_per_second": round(jobs / measured["elapsed_seconds"], 1),
        **measured,
        "enqueue": enqueue,
    }


async def _pgqueuer(configured_url: str, jobs: int, workers: int, probes: int) -> dict[str, Any]:
    """PgQueuer draining the same number of no-op jobs with the same number of processes,
    on its own scratch database of the same server."""
    import psycopg
    from pgqueuer import PsycopgDriver
    from pgqueuer.queries import Queries

    from tidings.bench import pgqueuer_worker

    async with scratch_database(configured_url) as url:
        dsn = libpq_url(url)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as connection:
            queries = Queries(driver=PsycopgDriver(connection))
            await queries.install()
            started = time.perf_counter()
            for start in range(0, jobs, ENQUEUE_CHUNK):
                count = min(ENQUEUE_CHUNK, jobs - start)
                await queries.enqueue([BENCH_KIND] * count, [None] * count, [0] * count)
            batch_seconds = time.perf_counter() - started

            async def queue_empty() -> bool:
                return sum(row.count for row in await queries.queue_size()) == 0

            async def send_probe(number: int) -> None:
                await queries.enqueue(PING_KIND, str(number).encode())

            command = [sys.executable, "-m", pgqueuer_worker.__name__, dsn]
            measured = await run_benchmark_workers(
                [command] * workers,
                queue_empty=queue_empty,
                send_probe=send_probe,
                probes=probes,
            )
    return {
        "jobs_per_second": round(jobs / measured["elapsed_seconds"], 1),
        **measured,
        "enqueue": {
            "batch_per_second": round(jobs / batch_seconds, 1),
            "batch_jobs_per_transaction": ENQUEUE_CHUNK,
        },
    }


async def bench_queue(
    configured_url: str,
    *,
    jobs: int,
    workers: int,
    concurrency: int,
    probes: int,
    peer: bool = True,
) -> dict[str, Any]:
    async with scratch_database(configured_url) as url:
        db = create_database(url, pool_size=2)
        try:
            await migrate.upgrade(db)
            measured = await _tidings(url, db, jobs, workers, concurrency, probes)
        finally:
            await db.dispose()
    result: dict[str, Any] = {
        "benchmark": "queue",
        "database": db.dialect,
        "jobs": jobs,
        "workers": workers,
        "concurrency_per_worker": concurrency,
        "tidings": measured,
        "pgqueuer": None,
        "ratio_to_pgqueuer": None,
        "note": "drain of jobs enqueued beforehand, no-op handler; enqueue timed apart; "
        "start latency: jobs enqueued one at a time on idle workers",
    }
    if not db.is_postgresql:
        result["note"] += "; SQLite has no NOTIFY: idle workers poll (queue.poll_interval_seconds)"
    elif not peer:
        result["note"] += "; PgQueuer comparison skipped (--no-peer)"
    elif not pgqueuer_installed():
        result["note"] += "; PgQueuer not installed: pip install 'tidings[bench]' to compare"
    else:
        compared = await _pgqueuer(configured_url, jobs, workers, probes)
        result["pgqueuer"] = compared
        result["ratio_to_pgqueuer"] = round(
            measured["jobs_per_second"] / compared["jobs_per_second"], 2
        )
    return result
