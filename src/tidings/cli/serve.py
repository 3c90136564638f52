"""`tidings serve`, `tidings api`, `tidings worker` and `tidings migrate`.

Before anything starts, the ports are bound and the database is reached (and migrated, for
`serve`): a port in use or a database that cannot be reached is one line and exit code 2,
never a traceback in the log. Then the process says what it is doing (cli/banner.py).

The web stack (cli/http_server.py) is imported by the commands that serve HTTP, when they run:
a worker process stays free of it unless it has a metrics port.
"""

from __future__ import annotations

import asyncio
import signal
import socket

import typer

from tidings.cli.banner import base_url, say, worker_lines
from tidings.cli.context import bind_port, container_for, out_console, run, state_of
from tidings.config import Settings
from tidings.observability.logging import get_logger

log = get_logger("tidings.cli")
HostOption = typer.Option(None, "--host", help="Listen address (default: http.host).")
PortOption = typer.Option(None, "--port", help="Listen port (default: http.port).")
HTTP_PORT_SETTING = "--port, or http.port (TIDINGS_HTTP_PORT)"
METRICS_PORT_SETTING = "metrics.port (TIDINGS_METRICS_PORT)"
WORKER_METRICS_PORT_SETTING = f"--metrics-port, or {METRICS_PORT_SETTING}"


def _metrics_listener(
    settings: Settings, port: int | None = None, *, setting: str = METRICS_PORT_SETTING
) -> tuple[socket.socket, str] | None:
    """The metrics port's socket and URL, when metrics have a port of their own."""
    port = port or settings.metrics.port
    if port is None:
        return None
    host = settings.metrics.host or settings.http.host
    sock = bind_port(host, port, setting=setting)
    # Listening at once: a scrape that comes before the metrics app runs waits, not fails.
    sock.listen(128)
    return sock, f"{base_url(host, port)}/metrics"


def _serve(ctx: typer.Context, host: str | None, port: int | None, *, embedded: bool) -> None:
    from tidings.cli.http_server import serve_app  # the web stack: see the module docstring

    settings = state_of(ctx).settings(long_running=True)
    host, port = host or settings.http.host, port or settings.http.port
    listener = bind_port(host, port, setting=HTTP_PORT_SETTING)
    metrics = _metrics_listener(settings)
    serve_app(settings, listener, base_url(host, port), metrics, embedded=embedded)


def serve(ctx: typer.Context, host: str | None = HostOption, port: int | None = PortOption) -> None:
    """Run everything in one process: migrations, the HTTP API and the workers (SQLite default).

    Prints where the data is, where mail goes and the addresses to open once it listens."""
    _serve(ctx, host, port, embedded=True)


def api(ctx: typer.Context, host: str | None = HostOption, port: int | None = PortOption) -> None:
    """Run only the HTTP API (no migrations, no workers): for deployments that scale parts apart."""
    _serve(ctx, host, port, embedded=False)


def worker(
    ctx: typer.Context,
    metrics_port: int | None = typer.Option(
        None,
        "--metrics-port",
        help="Serve Prometheus metrics for this worker on this port (default: metrics.port).",
    ),
) -> None:
    """Run the background workers (email, webhooks, campaign jobs) until SIGTERM or Ctrl-C.

    Start as many as you like, on any number of machines: they coordinate only through the
    database. At start, and every bulk_email.sweep_interval_seconds, a worker resumes campaign
    sends left with no live job (younger than bulk_email.resume_max_age). On SIGTERM/SIGINT it
    stops claiming, lets in-flight work wind down within queue.shutdown_grace_seconds (a
    campaign batch finishes its chunk; a preparation its pages), and exits 0.
    """
    settings = state_of(ctx).settings(long_running=True)
    metrics = _metrics_listener(settings, metrics_port, setting=WORKER_METRICS_PORT_SETTING)

    async def go() -> None:
        async with container_for(ctx) as container:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            log.info(
                "worker.started", database=container.db.dialect, provider=settings.email.provider
            )
            metrics_url = metrics[1] if metrics else None
            from tidings.bootstrap.schema import schema_revision

            say(worker_lines(settings, await schema_revision(container), metrics_url))
            if metrics is None:
                await container.run_workers(stop)
            else:
                from tidings.cli.http_server import with_metrics  # only with a metrics port

                await with_metrics(container.run_workers(stop), metrics[0], container)
            log.info("worker.stopped")

    run(go)


def migrate(
    ctx: typer.Context,
    downgrade_to: str = typer.Option(
        None, "--downgrade-to", help="Roll back to this revision instead (`base` for empty)."
    ),
) -> None:
    """Apply database migrations up to the latest revision (safe to run repeatedly)."""
    from tidings.bootstrap import build
    from tidings.bootstrap.schema import migrate_schema

    container = build(state_of(ctx).settings())

    async def go() -> str:
        try:
            return await migrate_schema(container, downgrade_to=downgrade_to)
        finally:
            await container.close()

    out_console.print(f"Database at revision {run(go)}.")
