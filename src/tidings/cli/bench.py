"""The `tidings bench` command group.

Each benchmark's module is imported by its command when it runs: between them they load the
API, PgQueuer and the seeding code, none of which the other commands (a worker among them,
whose process builds this command tree too) should carry in memory.
"""

from __future__ import annotations

import asyncio
import json

import typer

from tidings.bootstrap import utcnow
from tidings.cli.context import state_of
from tidings.observability.logging import configure_logging

app = typer.Typer(
    help="Benchmarks: measure and print JSON (never pass/fail).", no_args_is_help=True
)


@app.command("queue")
def queue(
    ctx: typer.Context,
    jobs: int = typer.Option(5000, "--jobs", min=1, help="Jobs enqueued, then drained."),
    workers: int = typer.Option(2, "--workers", min=1, max=64, help="Worker processes."),
    concurrency: int = typer.Option(
        100, "--concurrency", min=1, max=1000, help="Jobs in flight per tidings worker."
    ),
    probes: int = typer.Option(
        30, "--latency-probes", min=0, max=1000, help="Jobs sent one by one to idle workers."
    ),
    peer: bool = typer.Option(
        True, "--peer/--no-peer", help="On PostgreSQL, also run PgQueuer when it is installed."
    ),
) -> None:
    """Jobs drained per second by W worker processes with a no-op handler (BEN-3), enqueue
    rates (one job per transaction, and 1,000) and the start latency of a job sent to idle
    workers, on a scratch database of the configured kind (created and dropped). On
    PostgreSQL, PgQueuer (`pip install 'tidings[bench]'`) does the same on another scratch
    database of the same server in the same run, and the ratio is printed."""
    from tidings.bench.queue import bench_queue

    url = state_of(ctx).settings().database.url
    result = bench_queue(
        url, jobs=jobs, workers=workers, concurrency=concurrency, probes=probes, peer=peer
    )
    print(json.dumps(asyncio.run(result), indent=2))


@app.command("render")
def render(
    recipients: int = typer.Option(100_000, "--recipients", min=1, help="Messages to personalise."),
    sample: int = typer.Option(
        500, "--compare-sample", min=1, help="Recipients given a full render, for comparison."
    ),
) -> None:
    """Personalised messages per second (rendered once per segment, headers built, bytes
    ready for SMTP), beside a full template render and EmailMessage per recipient (CMP-3)."""
    from tidings.bench.render import run_render_benchmark

    print(
        json.dumps(
            run_render_benchmark(recipients, now=utcnow(), comparison_sample=sample), indent=2
        )
    )


@app.command("import")
def import_(
    ctx: typer.Context,
    rows: int = typer.Argument(100_000, min=1, help="CSV rows to generate and import."),
    webhooks: int = typer.Option(
        0,
        "--webhooks",
        min=0,
        max=50,
        help="Also import into a fresh database with this many `*` webhook endpoints, and "
        "report the time against the import without any (`webhooks.ratio`).",
    ),
) -> None:
    """CSV rows imported per second (AUD-9) on a scratch database of the configured kind."""
    from tidings.bench.importing import bench_import

    url = state_of(ctx).settings().database.url
    print(json.dumps(asyncio.run(bench_import(url, rows=rows, webhooks=webhooks)), indent=2))


@app.command("prepare")
def prepare(
    ctx: typer.Context,
    members: int = typer.Argument(
        100_000, min=1, help="Subscribers to seed (half free, half paid)."
    ),
    concurrency: int = typer.Argument(
        2, min=1, max=64, help="bulk_email.batch_creation_concurrency."
    ),
) -> None:
    """Recipient preparation (BEN-1) on a scratch database of the configured kind: the full
    audience, discard-and-rebuild, a label audience, each beside one bare INSERT … SELECT."""
    from tidings.bench.prepare import bench_prepare

    url = state_of(ctx).settings().database.url
    print(json.dumps(asyncio.run(bench_prepare(url, members, concurrency)), indent=2))


@app.command("send")
def send(
    ctx: typer.Context,
    recipients: int = typer.Option(5000, "--recipients", min=1, help="Campaign size."),
    workers: int = typer.Option(1, "--workers", min=1, max=32, help="Worker processes."),
    connections: int = typer.Option(
        8, "--connections", min=1, max=100, help="SMTP connections (worker pool and bare client)."
    ),
    python_sink: bool = typer.Option(
        False, "--python-sink", help="Use tidings dev-smtp even when Postfix smtp-sink is found."
    ),
    provider: list[str] = typer.Option(
        ["smtp", "http"], "--provider", help="smtp, http (the batch API), or both (repeat)."
    ),
    dkim: bool = typer.Option(
        False,
        "--dkim",
        help="Also send the SMTP campaign DKIM-signed (a fresh 2048-bit key; needs openssl) "
        "and report the rate beside the unsigned one.",
    ),
) -> None:
    """Campaign recipients per second (BEN-2) through real worker processes to a local SMTP
    sink and to the local batch-API server, each beside a bare client (aiosmtplib, httpx)
    sending the same messages to the same server in the same run; also the peak memory of a
    process that only loads the worker's libraries, and on PostgreSQL a bare psycopg client
    building the batch requests from the send's rows with the least SQL (the floor with a
    database)."""
    from tidings.bench.send import bench_send

    unknown = set(provider) - {"smtp", "http"}
    if unknown:
        raise typer.BadParameter(f"unknown: {', '.join(sorted(unknown))}", param_hint="--provider")
    url = state_of(ctx).settings().database.url
    result = bench_send(
        url,
        recipients=recipients,
        workers=workers,
        connections=connections,
        prefer_postfix=not python_sink,
        providers=tuple(provider),
        dkim=dkim,
    )
    print(json.dumps(asyncio.run(result), indent=2))


@app.command("subscribe")
def subscribe(
    ctx: typer.Context,
    requests: int = typer.Option(50, "--requests", min=1, max=10_000, help="Requests per case."),
) -> None:
    """Median time of a public subscribe request for a new, pending, confirmed, unsubscribed
    and suppressed address (AUD-5: no enumeration by timing; target: the slowest median
    under 1.2x the fastest), through the real app on a scratch database of the configured
    kind."""
    from tidings.bench.subscribe import bench_subscribe

    url = state_of(ctx).settings().database.url
    configure_logging(level="warning")  # a log line per request would be timed too
    print(json.dumps(asyncio.run(bench_subscribe(url, requests=requests)), indent=2))


@app.command("events")
def events(
    ctx: typer.Context,
    count: int = typer.Option(20_000, "--events", min=1, help="Delivered events posted."),
    connections: int = typer.Option(
        32, "--connections", min=1, max=1000, help="Requests in flight at once."
    ),
) -> None:
    """Signed Mailgun events per second taken by one `tidings api` process (verified,
    recorded once, applied to the subscriber's recipient row), beside a bare multi-row INSERT of
    the same rows, on a scratch database of the configured kind (PRV-6)."""
    from tidings.bench.event_intake import bench_events

    url = state_of(ctx).settings().database.url
    result = bench_events(url, events=count, connections=connections)
    print(json.dumps(asyncio.run(result), indent=2))


@app.command("tracking")
def tracking(
    ctx: typer.Context,
    hits: int = typer.Option(20_000, "--hits", min=100, help="Opens and clicks sent."),
    connections: int = typer.Option(
        64, "--connections", min=1, max=1000, help="Burst requests in flight at once."
    ),
    report_recipients: int = typer.Option(
        1_000_000,
        "--report-recipients",
        min=1,
        help="Recipients of the campaign whose results are read (ENG-5).",
    ),
) -> None:
    """Opens and clicks per second taken by one `tidings api` process (ENG-3): a burst of
    privacy-proxy opens and scanner clicks beside people's clicks, whose redirect latency is
    reported, beside a bare multi-row INSERT of the same rows; then the fold into the counters
    and the time to read a large campaign's results, on a scratch database of the configured
    kind."""
    from tidings.bench.tracking import bench_tracking

    url = state_of(ctx).settings().database.url
    result = bench_tracking(
        url, hits=hits, connections=connections, report_recipients=report_recipients
    )
    print(json.dumps(asyncio.run(result), indent=2))
