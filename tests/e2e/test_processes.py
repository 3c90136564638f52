"""The worker process honours SIGTERM/SIGINT, and the benchmarks run and print JSON."""

import asyncio
import json
import os
import signal
import sys

import pytest

from tidings.bench.queue import pgqueuer_installed
from tidings.storage import migrate
from tidings.storage.database import create_database


def _env(database_url: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    return {**clean, "TIDINGS_DATABASE_URL": database_url, "TIDINGS_LOG_FORMAT": "json"}


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
async def test_worker_stops_cleanly_on_signal(database_url: str, stop_signal: int) -> None:
    """Deploys send SIGTERM: the worker must stop claiming, drain, and exit 0 (not crash)."""
    database = create_database(database_url)
    await migrate.upgrade(database)
    await database.dispose()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tidings",
        "worker",
        env=_env(database_url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    started = await asyncio.wait_for(process.stdout.readline(), 30)
    assert b"worker.started" in started
    process.send_signal(stop_signal)
    output, _ = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, output.decode()
    assert b"worker.stopped" in output


async def test_worker_serves_its_own_metrics(sqlite_url: str) -> None:
    """Job outcomes are counted in the worker process; Prometheus must be able to scrape them."""
    import socket

    import httpx

    database = create_database(sqlite_url)
    await migrate.upgrade(database)
    await database.dispose()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tidings",
        "worker",
        "--metrics-port",
        str(port),
        env=_env(sqlite_url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    try:
        await asyncio.wait_for(process.stdout.readline(), 30)
        async with httpx.AsyncClient() as client:
            scraped = await client.get(f"http://127.0.0.1:{port}/metrics")
        assert scraped.status_code == 200
        assert "tidings_jobs_finished" in scraped.text
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0


async def test_worker_refuses_an_unmigrated_database(empty_sqlite_url: str) -> None:
    """A worker on an old schema would fail every job; it refuses to start and says why."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tidings",
        "worker",
        env=_env(empty_sqlite_url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, errors = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 1
    assert b"tidings migrate" in errors


async def test_bench_queue_prints_well_formed_json(database_url: str) -> None:
    """BEN-3: the figures are for people; the test checks only that they are there, that every
    job was drained exactly once, and that the peer ran where it can (PostgreSQL, installed)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tidings",
        "bench",
        "queue",
        "--jobs",
        "40",
        "--workers",
        "2",
        "--latency-probes",
        "3",
        env=_env(database_url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    output, errors = await asyncio.wait_for(process.communicate(), 180)
    assert process.returncode == 0, errors.decode()
    result = json.loads(output)
    assert result["database"] == database_url.split(":")[0]
    assert (result["jobs"], result["workers"]) == (40, 2)
    measured = result["tidings"]
    assert sum(measured["handled_per_worker"]) == 40
    assert measured["jobs_per_second"] > 0
    assert measured["start_latency_ms"]["probes"] == 3
    assert measured["enqueue"]["single_per_second"] > 0
    assert all(rss > 0 for rss in measured["worker_max_rss_mib"])
    if result["database"] == "postgresql" and pgqueuer_installed():
        assert sum(result["pgqueuer"]["handled_per_worker"]) == 40
        assert result["ratio_to_pgqueuer"] > 0
    else:
        assert (result["pgqueuer"], result["ratio_to_pgqueuer"]) == (None, None)


async def test_bench_prepare_prints_well_formed_json(database_url: str) -> None:
    """BEN-1's figures are for people; the test checks the run completes and reports every
    phase beside its reference, with counts that add up (the A/B test's variants and
    remainder too)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tidings",
        "bench",
        "prepare",
        "3000",
        "2",
        env=_env(database_url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    output, errors = await asyncio.wait_for(process.communicate(), 180)
    assert process.returncode == 0, errors.decode()
    result = json.loads(output)
    assert result["database"]["dialect"] == database_url.split(":")[0]
    assert result["reference_insert_select"]["rows"] == 3000
    assert result["full_audience"]["candidates"] == 3000
    assert result["discard_and_rebuild"]["candidates"] == 3000
    assert result["label_audience"]["candidates"] == 600  # every fifth member
    assert result["discard_and_rebuild"]["phases"]["discard"] > 0
    for key in ("ratio_full_to_reference", "ratio_label_to_reference"):
        assert result[key] > 0
    assert result["full_audience"]["peak_rss_mb"] > 0
    split = result["ab_test_audience"]["split"]  # 3 variants in a 20% test share
    assert result["ab_test_audience"]["candidates"] == 3000
    assert split["accounted"] is True
    assert sorted(split["variants"]) == ["v1", "v2", "v3"]
    assert sum(split["variants"].values()) + split["remainder"] == 3000
    assert split["expected_per_variant"] == 200.0
    assert result["ratio_ab_to_full"] > 0


async def test_bench_send_prints_well_formed_json(database_url: str) -> None:
    """BEN-2 runs end to end: a real worker sends a campaign to an SMTP sink process and to the
    batch-API server, each beside a bare client (three for the batch API: prebuilt bodies,
    requests built while sending, and those built from the database's rows with the least SQL),
    and the JSON names the sink, the ratios, the database's growth, the memory floor, the
    bench's own peak memory and the accounting and duplicates counted outside its memory."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tidings",
        "bench",
        "send",
        "--recipients",
        "60",
        "--python-sink",
        env=_env(database_url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    output, errors = await asyncio.wait_for(process.communicate(), 180)
    assert process.returncode == 0, errors.decode()
    result = json.loads(output)
    smtp, http = result["smtp"], result["http"]
    assert smtp["sink"] == "tidings dev-smtp (aiosmtpd)"
    for figures in (smtp, http):
        assert figures["tidings"]["status"] == "submitted"
        assert figures["tidings"]["sent"] == 60
        assert figures["bare_client"]["messages"] == 60
        assert figures["ratio_to_bare_client"] > 0
        # None if the send outran a poll or used under one clock tick.
        cpu = figures["tidings"]["worker_cpu_us_per_recipient"]
        assert cpu is None or cpu > 0
        # The send writes recipient rows, batches and jobs: PostgreSQL grows by them (SQLite
        # may fit 60 recipients' rows in pages it already has).
        assert figures["tidings"]["database_mb_with_audience"] > 0
        growth = figures["tidings"]["database_growth_bytes_per_recipient"]
        assert growth > 0 if database_url.startswith("postgresql") else growth >= 0
        wal = figures["tidings"]["wal_bytes_per_recipient"]
        assert wal > 0 if database_url.startswith("postgresql") else wal is None
        # Each batch writes at least its claim and its outcome, each a transaction of its own.
        assert figures["tidings"]["batches"] >= 1
        writes = figures["tidings"]["write_transactions_per_batch"]
        assert writes >= 2 if database_url.startswith("postgresql") else writes is None
    building = http["bare_client_building_requests"]
    assert (building["messages"], building["requests_built"]) == (60, "while sending")
    assert http["bare_client"]["requests_built"] == "beforehand"
    assert http["ratio_to_bare_client_building_requests"] > 0
    # The floor with a database: the same 60 readers read from the send's rows and marked
    # again, by bare psycopg (PostgreSQL only).
    least = http["bare_client_with_database"]
    if database_url.startswith("postgresql"):
        assert (least["messages"], least["batches"]) == (60, http["tidings"]["batches"])
        assert http["ratio_to_bare_client_with_database"] > 0
    else:
        assert least is None
        assert http["ratio_to_bare_client_with_database"] is None
    # The memory floor: the worker's libraries alone, connected; the worker holds more.
    floor_rss = result["bare_process"]["peak_rss_mb"]
    assert "sqlalchemy.ext.asyncio" in result["bare_process"]["libraries"]
    for figures in (smtp, http):
        (above,) = figures["tidings"]["worker_peak_rss_mb_above_bare_process"]
        (peak,) = figures["tidings"]["worker_peak_rss_mb"]
        assert above == round(peak - floor_rss, 1)
        assert above > 0
    # The bench streams (issue 42): its own peak is reported, the accounting is counted by the
    # database, the provider's accepted addresses in SQL, and at 60 readers no client samples.
    assert result["bench_peak_rss_mb"] >= result["bench_peak_rss_mb_before_runs"] > 0
    assert smtp["sink_peak_rss_mb"] > 0
    assert http["provider_peak_rss_mb"] > 0
    for figures in (smtp, http):
        assert figures["tidings"]["recipients_by_state"] == {"sent": 60}
        assert figures["tidings"]["accounted"] == 60
        assert figures["bare_client"]["sampled"] is None
        accepted = figures["tidings"]["at_provider"]
        assert accepted == {"accepted": 60, "distinct": 60, "duplicates": 0}
    assert building["sampled"] is None
    if least is not None:
        assert least["sampled"] is None
