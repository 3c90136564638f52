"""`tidings bench send` (BEN-2): a campaign of N recipients submitted by real `tidings worker`
processes to a local SMTP sink, beside a bare aiosmtplib client sending the same personalised
messages to the same sink with the same number of connections, in the same run: the ratio is
the figure. Postfix's `smtp-sink` is used when found (Python sinks saturate first); the JSON
says which sink ran.

The bench itself streams (issue 42): the audience is seeded in SQL, the reference clients run
on bounded batches or on a sample the JSON names, the accounting is counted by the database
and the provider's accepted addresses go to a file counted in SQL, so `bench_peak_rss_mb`
stays flat in the campaign's size."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidings.audience.newsletters import NewsletterFields
from tidings.bench import readings, seeding
from tidings.bench.bare_clients import (
    BATCHES_IN_FLIGHT,
    BENCH_DOMAIN,
    bare_client,
    bare_database_client,
    bare_http_client,
)
from tidings.bench.bare_process import peak_rss_mb
from tidings.bench.local_processes import (
    DEFAULT_POSTFIX_ROOT,
    POSTFIX_ROOT_ENV,
    POSTFIX_SINK,
    cpu_seconds,
    dev_provider_process,
    postfix_root,
    smtp_sink,
)
from tidings.bench.provider_checks import accepted_at_provider, accepted_log, log_size
from tidings.bench.scratch import scratch_database
from tidings.bootstrap import Container, running
from tidings.campaigns.commands import DraftFields
from tidings.config import load_settings
from tidings.domain.sending import RecipientState
from tidings.observability.logging import configure_logging
from tidings.rendering.sample import sample_content
from tidings.storage.database import async_url


async def bare_process(url: str) -> dict[str, Any]:
    """The memory floor for a worker (`bare_process`): its libraries loaded, connected, nothing
    sent."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tidings.bench.bare_process",
        async_url(url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    output, errors = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the bare process failed: {errors.decode(errors='replace')[-500:]}")
    figures: dict[str, Any] = json.loads(output)
    return figures


@dataclass
class _Watched:
    """What watching the workers until the send ended gave: its last status, the wall time
    from their start, their peak memory, and their CPU when it was prepared and at the end."""

    status: str
    wall: float
    rss: list[float | None]
    cpu_at_prepared: list[float | None] | None
    cpu_done: list[float | None]


@dataclass
class _Reading:
    """The database's size and, on PostgreSQL, its WAL position and next transaction id."""

    size: int
    wal: int | None
    xid: int | None


async def _seeded_campaign(container: Container, count: int) -> tuple[int, _Reading]:
    """An audience of `count` and the sample issue sent to it (queued, not yet prepared);
    its id and the database's size and WAL position once the audience is in."""
    content = sample_content()
    newsletter = await container.newsletters.create(
        NewsletterFields(
            slug="bench", name="Bench", sender_name="Bench", sender_address="bench@example.org"
        )
    )
    async with container.db.write() as conn:
        await seeding.seed_audience(
            conn, newsletter_id=newsletter.id, count=count, now=container.sending.now()
        )
    async with container.db.read() as conn:
        seeded = _Reading(
            await readings.database_bytes(conn), await readings.wal_position(conn), None
        )
    draft = await container.campaigns.create(
        "bench",
        DraftFields(
            subject=content.subject,
            preheader=content.preheader,
            body=content.body,
            body_format=content.body_format,
        ),
    )
    await container.sends.send(draft.campaign.id)
    return draft.campaign.id, seeded


def _worker_environment(url: str, worker_env: dict[str, str]) -> dict[str, str]:
    """This process's environment without its own TIDINGS_ settings, the scratch database's
    and the provider's in their place."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    return {
        **clean,
        "TIDINGS_DATABASE_URL": url,
        "TIDINGS_LOG_LEVEL": "warning",
        "TIDINGS_LOG_FORMAT": "json",
        **worker_env,
    }


async def _watch_workers(
    container: Container, campaign_id: int, workers: int, env: dict[str, str]
) -> _Watched:
    """Start `workers` worker processes and poll the campaign until it is submitted or failed;
    the workers are stopped (SIGTERM) before this returns."""
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tidings",
            "worker",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        for _ in range(workers)
    ]
    started = time.perf_counter()
    cpu_at_prepared: list[float | None] | None = None
    try:
        while True:
            status = (await container.campaigns.get(campaign_id)).campaign.status
            if status in ("submitted", "failed"):
                break
            if cpu_at_prepared is None:
                prepared = await container.sends.get_send(campaign_id)
                if prepared is not None and prepared.prepared_at is not None:
                    cpu_at_prepared = [cpu_seconds(process.pid) for process in processes]
            await asyncio.sleep(0.2)
        wall = time.perf_counter() - started
        rss = [peak_rss_mb(process.pid) for process in processes]
        cpu_done = [cpu_seconds(process.pid) for process in processes]
    finally:
        for process in processes:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            await process.wait()
    return _Watched(status, wall, rss, cpu_at_prepared, cpu_done)


async def tidings_send(
    url: str, count: int, workers: int, worker_env: dict[str, str], *, accepted: Path | None
) -> dict[str, Any]:
    """A real campaign: seeded audience, queued send, `workers` worker processes configured
    by `worker_env` (the provider). Rate from the first batch claimed to the last finished.
    With `accepted`, the file the provider logs accepted addresses to (`bench.lean_servers`):
    what it gains during the send, counted in SQL, is `at_provider`."""
    settings = load_settings(database={"url": url}, log={"level": "warning", "format": "json"})
    async with running(settings, apply_migrations=True) as container:
        campaign_id, seeded = await _seeded_campaign(container, count)
        env = _worker_environment(url, worker_env)
        async with container.db.read() as conn:
            seeded.xid = await readings.next_transaction_id(conn)
        # The provider has answered every earlier request: what it accepts from the workers
        # is what its log gains from here.
        before = None if accepted is None else log_size(accepted)
        watched = await _watch_workers(container, campaign_id, workers, env)
        window = await container.sends.submission_window(campaign_id)
        send = await container.sends.get_send(campaign_id)
        async with container.db.read() as conn:
            sent = _Reading(
                await readings.database_bytes(conn),
                await readings.wal_position(conn),
                await readings.next_transaction_id(conn),
            )
            batches = await readings.batch_count(conn, campaign_id)
            states = await readings.recipient_states(conn, campaign_id)
    assert send is not None
    at_provider = (
        None
        if accepted is None or before is None
        else await accepted_at_provider(url, accepted, before, log_size(accepted))
    )
    seconds = window.total_seconds() if window else watched.wall
    return {
        "status": watched.status,
        "recipients": count,
        "sent": send.email_count,
        "workers": workers,
        "submission_seconds": round(seconds, 3),
        "wall_seconds_with_preparation": round(watched.wall, 3),
        "per_second": round(count / seconds, 1) if seconds else None,
        "per_second_per_worker": round(count / seconds / workers, 1) if seconds else None,
        "worker_peak_rss_mb": watched.rss,
        # Counted by the database, never in the bench: every reader's row, and those in a
        # final state (neither pending nor in flight).
        "recipients_by_state": states,
        "accounted": sum(rows for state, rows in states.items() if state not in _UNSETTLED),
        **_database_figures(seeded, sent, count, batches),
        # CPU the workers spent per recipient once the campaign was prepared: unlike the rate,
        # barely moved by other load on the machine, so it compares runs on a busy host.
        "worker_cpu_us_per_recipient": _cpu_per_recipient(
            watched.cpu_at_prepared, watched.cpu_done, count
        ),
        # Accepted by the provider, distinct, and twice or more: counted in SQL (None when it
        # logs nothing).
        "at_provider": at_provider,
    }


_UNSETTLED = frozenset({RecipientState.PENDING.value, RecipientState.SENDING.value})


def _database_figures(seeded: _Reading, sent: _Reading, count: int, batches: int) -> dict[str, Any]:
    wal = None if seeded.wal is None or sent.wal is None else sent.wal - seeded.wal
    return {
        # What the send itself added (preparation, recipient rows, batches, jobs): seeded
        # audience before, the database once the campaign is submitted after.
        "database_mb_with_audience": round(seeded.size / 2**20, 1),
        "database_growth_mb": round((sent.size - seeded.size) / 2**20, 1),
        "database_growth_bytes_per_recipient": round((sent.size - seeded.size) / count),
        # Write-ahead log the send wrote (PostgreSQL; this server's other databases too).
        "wal_bytes_per_recipient": None if wal is None else round(wal / count),
        # Writing transactions from the workers' start to the end (PostgreSQL; preparation,
        # batches, the queue's own, and this server's other databases too) per batch.
        "batches": batches,
        "write_transactions_per_batch": (
            None
            if seeded.xid is None or sent.xid is None or not batches
            else round((sent.xid - seeded.xid) / batches, 2)
        ),
    }


def _cpu_per_recipient(
    before: list[float | None] | None, after: list[float | None], count: int
) -> float | None:
    if before is None or None in before or None in after or not count:
        return None
    spent = sum(a or 0.0 for a in after) - sum(b or 0.0 for b in before)
    if spent <= 0:
        # Under one clock tick (10 ms): a send this small is below what /proc can measure.
        return None
    return round(spent / count * 1_000_000, 1)


def _ratio(ours: dict[str, Any], bare: dict[str, Any]) -> float | None:
    if not ours["per_second"]:
        return None
    return round(float(ours["per_second"]) / float(bare["per_second"]), 3)


async def smtp_figures(
    url: str,
    *,
    recipients: int,
    workers: int,
    connections: int,
    prefer_postfix: bool,
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    with accepted_log() as log:
        async with smtp_sink(prefer_postfix, log) as (sink_name, port, sink):
            bare = await bare_client(port, recipients, connections)
            async with scratch_database(url) as scratch:
                environment = {
                    "TIDINGS_EMAIL_PROVIDER": "smtp",
                    "TIDINGS_SMTP_HOST": "127.0.0.1",
                    "TIDINGS_SMTP_PORT": str(port),
                    "TIDINGS_SMTP_SECURITY": "none",
                    "TIDINGS_SMTP_POOL_SIZE": str(connections),
                    "TIDINGS_BULK_EMAIL_SUBMISSION_CONCURRENCY": str(connections),
                    **(extra_env or {}),
                }
                # Postfix's sink counts nothing; the Python one logs whom it accepted.
                counted = None if sink_name == POSTFIX_SINK else log
                ours = await tidings_send(
                    scratch, recipients, workers, environment, accepted=counted
                )
            sink_rss = peak_rss_mb(sink.pid)
    return {
        "sink": sink_name,
        "sink_peak_rss_mb": sink_rss,
        "bare_client": bare,
        "tidings": ours,
        "ratio_to_bare_client": _ratio(ours, bare),
    }


async def dkim_figures(
    url: str, *, recipients: int, workers: int, connections: int, prefer_postfix: bool
) -> dict[str, Any]:
    """The SMTP figures again, each message signed with a fresh 2048-bit RSA key (PRV-7)."""
    with tempfile.TemporaryDirectory() as folder:
        key = Path(folder) / "dkim.pem"
        made = await asyncio.create_subprocess_exec(
            *("openssl", "genrsa", "-out", str(key), "2048"),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        if await made.wait() != 0:
            raise RuntimeError("openssl genrsa failed: --dkim needs openssl on PATH")
        return await smtp_figures(
            url,
            recipients=recipients,
            workers=workers,
            connections=connections,
            prefer_postfix=prefer_postfix,
            extra_env={
                "TIDINGS_DKIM_SELECTOR": "bench",
                "TIDINGS_DKIM_DOMAIN": "example.org",
                "TIDINGS_DKIM_PRIVATE_KEY_FILE": str(key),
            },
        )


async def http_figures(url: str, *, recipients: int, workers: int) -> dict[str, Any]:
    with accepted_log() as log:
        return await _http_figures(url, recipients=recipients, workers=workers, log=log)


async def _http_figures(url: str, *, recipients: int, workers: int, log: Path) -> dict[str, Any]:
    async with dev_provider_process(log) as (port, provider):
        bare = await bare_http_client(port, recipients, concurrency=BATCHES_IN_FLIGHT)
        building = await bare_http_client(
            port, recipients, concurrency=BATCHES_IN_FLIGHT, build_while_sending=True
        )
        async with scratch_database(url) as scratch:
            environment = {
                "TIDINGS_EMAIL_PROVIDER": "mailgun",
                "TIDINGS_MAILGUN_API_KEY": "bench-key",
                "TIDINGS_MAILGUN_DOMAIN": BENCH_DOMAIN,
                "TIDINGS_MAILGUN_API_BASE_URL": f"http://127.0.0.1:{port}",
                "TIDINGS_BULK_EMAIL_CONCURRENCY": str(BATCHES_IN_FLIGHT),
            }
            ours = await tidings_send(scratch, recipients, workers, environment, accepted=log)
            least = await bare_database_client(port, scratch)
        provider_rss = peak_rss_mb(provider.pid)
    return {
        "server": "tidings dev-provider (Mailgun-compatible)",
        # Its peak: the app keeps no recipient here (`bench.lean_servers`).
        "provider_peak_rss_mb": provider_rss,
        "bare_client": bare,
        "bare_client_building_requests": building,
        "tidings": ours,
        "ratio_to_bare_client": _ratio(ours, bare),
        # What the database and the accounting cost, beside the same requests built in-line.
        "ratio_to_bare_client_building_requests": _ratio(ours, building),
        # The least any send with a database could do (PostgreSQL): its distance to the client
        # building requests is what touching the rows costs, a worker's to it the guarantees.
        "bare_client_with_database": least,
        "ratio_of_bare_client_with_database_to_building_requests": (
            None if least is None else _ratio(least, building)
        ),
        "ratio_to_bare_client_with_database": None if least is None else _ratio(ours, least),
    }


async def bench_send(
    url: str,
    *,
    recipients: int,
    workers: int,
    connections: int,
    prefer_postfix: bool,
    providers: tuple[str, ...] = ("smtp", "http"),
    dkim: bool = False,
) -> dict[str, Any]:
    configure_logging("warning", "json")
    result: dict[str, Any] = {"benchmark": "send", "database": url.split(":", 1)[0]}
    # The bench's own memory, once its code is loaded and at the end: flat in `recipients`.
    result["bench_peak_rss_mb_before_runs"] = peak_rss_mb()
    async with scratch_database(url) as scratch:
        # A worker's memory beside what its libraries alone take, connected, nothing sent.
        result["bare_process"] = floor_process = await bare_process(scratch)
    if "smtp" in providers:
        result["smtp"] = await smtp_figures(
            url,
            recipients=recipients,
            workers=workers,
            connections=connections,
            prefer_postfix=prefer_postfix,
        )
        if dkim:
            result["smtp_dkim"] = await dkim_figures(
                url,
                recipients=recipients,
                workers=workers,
                connections=connections,
                prefer_postfix=prefer_postfix,
            )
            result["dkim_rate_ratio"] = _ratio(
                result["smtp_dkim"]["tidings"], result["smtp"]["tidings"]
            )
        if postfix_root() is None:
            result["postfix_hint"] = (
                f"for a faster sink: apt-get download postfix && dpkg -x postfix_*.deb "
                f"{DEFAULT_POSTFIX_ROOT} (or set {POSTFIX_ROOT_ENV})"
            )
    if "http" in providers:
        result["http"] = await http_figures(url, recipients=recipients, workers=workers)
    floor_rss = floor_process["peak_rss_mb"]
    for provider in ("smtp", "smtp_dkim", "http"):
        if provider in result:
            ours = result[provider]["tidings"]
            ours["worker_peak_rss_mb_above_bare_process"] = [
                None if rss is None or floor_rss is None else round(rss - floor_rss, 1)
                for rss in ours["worker_peak_rss_mb"]
            ]
    result["bench_peak_rss_mb"] = peak_rss_mb()
    return result
