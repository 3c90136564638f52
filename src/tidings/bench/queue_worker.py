"""A benchmark worker process: tidings' queue consuming no-op jobs (see `bench.processes` for
the stdin/stdout protocol it speaks with the parent)."""

from __future__ import annotations

import asyncio
import sys
import time

from tidings.bench.processes import BENCH_KIND, PING_KIND, serve_benchmark
from tidings.bootstrap import queue_policy, utcnow
from tidings.config import QueueSettings
from tidings.observability.logging import configure_logging
from tidings.queue.job import Job
from tidings.queue.policy import HandlerRegistry
from tidings.queue.service import JobQueue
from tidings.storage.database import create_database


async def main(database_url: str, concurrency: int) -> None:
    # stdout is the report channel to the parent: logs go to stderr, warnings only.
    configure_logging("warning", "json", sys.stderr)
    # Claims and outcome writes use a connection each, whatever the concurrency.
    db = create_database(database_url, pool_size=3)
    handled = 0
    ping_started: dict[int, float] = {}

    async def noop(job: Job) -> None:
        nonlocal handled
        handled += 1

    async def ping(job: Job) -> None:
        ping_started[int(job.payload["n"])] = time.time()

    registry = HandlerRegistry()
    registry.register(BENCH_KIND, noop, concurrency=concurrency)
    registry.register(PING_KIND, ping, concurrency=1)
    # The default timing (a poll a second; NOTIFY on PostgreSQL), pruning out of the way.
    policy = queue_policy(QueueSettings(prune_interval_seconds=86_400))
    queue = JobQueue(db, policy, utcnow)

    async def consume(stop: asyncio.Event) -> dict[str, object]:
        await queue.run_workers(registry, stop)
        return {"handled": handled, "ping_started": ping_started}

    try:
        await serve_benchmark(consume)
    finally:
        await db.dispose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
