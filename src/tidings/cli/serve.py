"""`tidings serve`, `tidings api`, `tidings worker` and `tidings migrate`.

Before anything starts, the ports are bound and the database is reached (and migrated, for
`serve`): a port in use or a database that cannot be reached is one line and exit code 2,
never a traceback in the log. Then the process says what it is doing (cli/banner.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Literal

import typer
import uvicorn
from fastapi import FastAPI

from tidings.api.app import create_app, create_metrics_app
from tidings.bootstrap import Container, build, start
from tidings.cli.banner import Revision, ServerBanner, base_url, worker_lines
from tidings.cli.context import bind_port, container_for, out_console, run, state_of
from tidings.config import Settings
from tidings.observability.logging import get_logger
from tidings.storage import migrate as migrations

log = get_logger("tidings.cli")
HostOption = typer.Option(None, "--host", help="Listen address (default: http.host).")
PortOption = typer.Option(None, "--port", help="Listen port (default: http.port).")
HTTP_PORT_SETTING = "--port, or http.port (TIDINGS_HTTP_PORT)"
METRICS_PORT_SETTING = "metrics.port (TIDINGS_METRICS_PORT)"
WORKER_METRICS_PORT_SETTING = f"--metrics-port, or {METRICS_PORT_SETTING}"


class _Server(uvicorn.Server):
    """uvicorn, minus its habit of re-raising SIGTERM after a graceful stop (exit 0 instead),
    calling `on_started` once it listens and the app has started."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_started = on_started

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._request_exit)
        try:
            yield
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    def _request_exit(self) -> None:
        self.force_exit = self.should_exit  # a second signal skips the grace period
        self.should_exit = True

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self.on_started()


class _MetricsServer(uvicorn.Server):
    """The metrics port: stopped by whoever runs it, never by signals of its own."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _uvicorn_config(
    app: FastAPI, settings: Settings, *, lifespan: Literal["on", "off"] = "on"
) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        lifespan=lifespan,
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=30,
        proxy_headers=True,
        forwarded_allow_ips=settings.http.trusted_proxies,
    )


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


async def _with_metrics(
    main: Awaitable[None], metrics: socket.socket | None, container: Container
) -> None:
    """Await `main`, serving `/metrics` on `metrics` (if any) until it returns."""
    if metrics is None:
        await main
        return
    app = create_metrics_app(container)
    server = _MetricsServer(_uvicorn_config(app, container.settings, lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[metrics]))
    try:
        await main
    finally:
        server.should_exit = True
        await serving


async def _revision(container: Container) -> Revision:
    current = await migrations.current_revisions(container.db)
    return Revision(", ".join(current) or "base", ", ".join(migrations.head_revisions()))


def _say(lines: list[str]) -> None:
    out_console.print("\n".join(lines), soft_wrap=True, highlight=False, markup=False)
    out_console.file.flush()


def _serve(ctx: typer.Context, host: str | None, port: int | None, *, embedded: bool) -> None:
    settings = state_of(ctx).settings(long_running=True)
    host, port = host or settings.http.host, port or settings.http.port
    listener = bind_port(host, port, setting=HTTP_PORT_SETTING)
    metrics = _metrics_listener(settings)
    url = base_url(host, port)
    metrics_url = (
        metrics[1] if metrics else (f"{url}/metrics" if settings.metrics.enabled else None)
    )
    container = build(settings)

    async def go() -> None:
        try:
            await start(container, apply_migrations=embedded)
            revision = await _revision(container)
        except BaseException:
            await container.close()
            raise
        # The app's lifespan starts the container again (migrated already: only the site
        # secret is read again) and closes it when the server stops.
        app = create_app(settings, run_workers=embedded, container=container)
        banner = ServerBanner(settings, revision, url, embedded, metrics_url)
        server = _Server(_uvicorn_config(app, settings), on_started=lambda: _say(banner.lines()))
        await _with_metrics(
            server.serve(sockets=[listener]), metrics[0] if metrics else None, container
        )

    run(go)


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
            _say(worker_lines(settings, await _revision(container), metrics_url))
            await _with_metrics(
                container.run_workers(stop), metrics[0] if metrics else None, container
            )
            log.info("worker.stopped")

    run(go)


def migrate(
    ctx: typer.Context,
    downgrade_to: str = typer.Option(
        None, "--downgrade-to", help="Roll back to this revision instead (`base` for empty)."
    ),
) -> None:
    """Apply database migrations up to the latest revision (safe to run repeatedly)."""
    container = build(state_of(ctx).settings())

    async def go() -> tuple[str, ...]:
        try:
            if downgrade_to:
                await migrations.downgrade(container.db, downgrade_to)
            else:
                await migrations.upgrade(container.db)
            return await migrations.current_revisions(container.db)
        finally:
            await container.close()

    revisions = run(go)
    out_console.print(f"Database at revision {', '.join(revisions) or 'base'}.")
