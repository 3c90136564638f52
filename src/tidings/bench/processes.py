"""Benchmark worker processes, for tidings' queue and for its peer, speaking one protocol.

The child prints `ready` once connected, starts consuming when it reads `go`, stops at the
next line (or end of input) and prints one JSON report: jobs handled, when each latency
probe started (wall clock, the same machine's as the parent's), and its peak memory. The
parent times the drain from `go` until the queue is empty, then sends latency probes one at
a time to the now idle workers, then stops them.
"""

from __future__ import annotations

import asyncio
import json
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

BENCH_KIND = "bench_noop"
PING_KIND = "bench_ping"
PROBE_SPACING_SECONDS = 0.1
SETTLE_TIMEOUT_SECONDS = 900.0  # a drain or a probe taking longer is a failure, not a figure


async def serve_benchmark(consume: Callable[[asyncio.Event], Awaitable[dict[str, Any]]]) -> None:
    """The child's side: `consume(stop)` runs the queue until `stop` is set and returns the
    report, to which the peak memory is added."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print("ready", flush=True)
    await reader.readline()
    stop = asyncio.Event()

    async def stop_on_next_line() -> None:
        await reader.readline()
        stop.set()

    watcher = asyncio.create_task(stop_on_next_line())
    try:
        report = await consume(stop)
    finally:
        watcher.cancel()
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({**report, "max_rss_mib": round(rss_kib / 1024, 1)}), flush=True)


async def run_benchmark_workers(
    commands: list[list[str]],
    *,
    queue_empty: Callable[[], Awaitable[bool]],
    send_probe: Callable[[int], Awaitable[None]],
    probes: int,
) -> dict[str, Any]:
    """The parent's side: start one process per command, time the drain of what was enqueued
    beforehand, then measure the start latency of `probes` jobs sent one by one (`send_probe`
    returns once the probe's enqueue has committed)."""
    processes = [
        await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        for command in commands
    ]
    committed: dict[int, float] = {}
    reports: list[dict[str, Any]] = []
    try:
        for process in processes:
            assert process.stdout is not None
            if (await process.stdout.readline()).strip() != b"ready":
                raise RuntimeError("a benchmark worker failed to start")
        started = time.perf_counter()
        for process in processes:
            assert process.stdin is not None
            process.stdin.write(b"go\n")
        # Completion lives in other processes' rows: polling them is the measurement.
        await _until(queue_empty, interval=0.005)
        elapsed = time.perf_counter() - started
        for number in range(probes):
            await asyncio.sleep(PROBE_SPACING_SECONDS)  # each probe finds the workers idle
            await send_probe(number)
            committed[number] = time.time()
        await _until(queue_empty, interval=0.05)
    finally:
        for process in processes:
            output, _ = await asyncio.wait_for(process.communicate(b"stop\n"), 60)
            if process.returncode == 0:
                reports.append(json.loads(output.decode().strip().splitlines()[-1]))
    if len(reports) != len(processes):
        raise RuntimeError("a benchmark worker failed")
    started_at = {int(n): t for report in reports for n, t in report["ping_started"].items()}
    latencies = sorted((started_at[n] - committed[n]) * 1000 for n in committed)
    return {
        "elapsed_seconds": round(elapsed, 3),
        "handled_per_worker": [report["handled"] for report in reports],
        "worker_max_rss_mib": [report["max_rss_mib"] for report in reports],
        "start_latency_ms": _summary(latencies),
    }


async def _until(condition: Callable[[], Awaitable[bool]], *, interval: float) -> None:
    async with asyncio.timeout(SETTLE_TIMEOUT_SECONDS):
        while not await condition():  # noqa: ASYNC110 - the condition is a database query
            await asyncio.sleep(interval)


def _summary(latencies_ms: list[float]) -> dict[str, float] | None:
    if not latencies_ms:
        return None
    quantiles = (
        statistics.quantiles(latencies_ms, n=20, method="inclusive")
        if len(latencies_ms) > 1
        else []
    )
    return {
        "probes": len(latencies_ms),
        "p50": round(statistics.median(latencies_ms), 1),
        "p95": round(quantiles[-1], 1) if quantiles else round(latencies_ms[0], 1),
        "max": round(latencies_ms[-1], 1),
    }
