"""A benchmark worker process running PgQueuer, the peer `tidings bench queue` compares with:
one QueueManager on one psycopg connection, PgQueuer's defaults (a batch of 10 per dequeue),
the same no-op handler and the same protocol as tidings' worker (`bench.processes`)."""

from __future__ import annotations

import asyncio
import sys
import time

import psycopg
from pgqueuer import PsycopgDriver, QueueManager
from pgqueuer.models import Job
from pgqueuer.queries import Queries

from tidings.bench.processes import BENCH_KIND, PING_KIND, serve_benchmark


async def main(dsn: str) -> None:
    connection = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    manager = QueueManager(queries=Queries(driver=PsycopgDriver(connection)))
    handled = 0
    ping_started: dict[int, float] = {}

    @manager.entrypoint(BENCH_KIND)
    async def noop(job: Job) -> None:
        nonlocal handled
        handled += 1

    @manager.entrypoint(PING_KIND)
    async def ping(job: Job) -> None:
        ping_started[int(job.payload or b"0")] = time.time()

    async def consume(stop: asyncio.Event) -> dict[str, object]:
        async def shut_down() -> None:
            await stop.wait()
            manager.shutdown.set()

        stopper = asyncio.create_task(shut_down())
        try:
            await manager.run()
        finally:
            stopper.cancel()
        return {"handled": handled, "ping_started": ping_started}

    try:
        await serve_benchmark(consume)
    finally:
        await connection.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
