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
import sys
import tempfile
from pathlib import Path
from typing import Any

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
    dev_provider_process,
    postfix_root,
    smtp_sink,
)
from tidings.bench.provider_checks import accepted_log
from tidings.bench.scratch import scratch_database
from tidings.bench.worker_send import tidings_send
from tidings.observability.logging import configure_logging
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
