"""A benchmark worker process: consumes `bench_noop` jobs until told to stop on stdin."""

from __future__ import annotations

import asyncio
import json
import resource
import sys

from tidings.bootstrap import queue_policy, utcnow
from tidings.config import QueueSettings
from tidings.observability.logging import configure_logging
from tidings.queue.job import Job
from tidings.queue.policy import HandlerRegistry
from tidings.queue.service import JobQueue
from tidings.storage.database import create_database

BENCH_KIND = "bench_noop"


async def main(database_url: str, concurrency: int) -> None:
    # stdout is the report channel to the parent: logs go to stderr, warnings only.
    configure_logging("warning", "json", sys.stderr)
    db = create_database(database_url, pool_size=max(2, concurrency))
    handled = 0

    async def noop(job: Job) -> None:
        nonlocal handled
        handled += 1

    registry = HandlerRegistry()
    registry.register(BENCH_KIND, noop, concurrency=concurrency)
    policy = queue_policy(QueueSettings(poll_interval_seconds=0.01, prune_interval_seconds=86_400))
    queue = JobQueue(db, policy, utcnow)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(sys.stdin.fileno(), stop.set)  # any input (or EOF) means stop
    print("ready", flush=True)
    await queue.run_workers(registry, stop)
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"handled": handled, "max_rss_mib": round(rss_kib / 1024, 1)}), flush=True)
    await db.dispose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
