"""`tidings serve`, `tidings api` and `tidings migrate`."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator

import prometheus_client
import typer
import uvicorn

from tidings.api.app import create_app
from tidings.bootstrap import build
from tidings.cli.context import container_for, err_console, run, state_of
from tidings.observability.logging import get_logger
from tidings.storage import migrate as migrations

log = get_logger("tidings.cli")
HostOption = typer.Option(None, "--host", help="Listen address (default: http.host).")
PortOption = typer.Option(None, "--port", help="Listen port (default: http.port).")


class _Server(uvicorn.Server):
    """uvicorn, minus its habit of re-raising SIGTERM after a graceful stop (exit 0 instead)."""

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


def _serve(ctx: typer.Context, host: str | None, port: int | None, *, embedded: bool) -> None:
    settings = state_of(ctx).settings()
    app = create_app(settings, apply_migrations=embedded, run_workers=embedded)
    config = uvicorn.Config(
        app,
        host=host or settings.http.host,
        port=port or settings.http.port,
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=30,
        proxy_headers=True,
        forwarded_allow_ips=settings.http.trusted_proxies,
    )
    asyncio.run(_Server(config).serve())


def serve(ctx: typer.Context, host: str | None = HostOption, port: int | None = PortOption) -> None:
    """Run everything in one process: migrations, the HTTP API and the workers (SQLite default)."""
    _serve(ctx, host, port, embedded=True)


def api(ctx: typer.Context, host: str | None = HostOption, port: int | None = PortOption) -> None:
    """Run only the HTTP API (no migrations, no workers): for deployments that scale parts apart."""
    _serve(ctx, host, port, embedded=False)


def worker(
    ctx: typer.Context,
    metrics_port: int | None = typer.Option(
        None, "--metrics-port", help="Serve Prometheus metrics for this worker on this port."
    ),
) -> None:
    """Run the background workers (email, webhooks, campaign jobs) until SIGTERM or Ctrl-C.

    Start as many as you like, on any number of machines: they coordinate only through the
    database. At start, and every bulk_email.sweep_interval_seconds, a worker resumes campaign
    sends left with no live job (younger than bulk_email.resume_max_age). On SIGTERM/SIGINT it
    stops claiming, lets in-flight work wind down within queue.shutdown_grace_seconds (a
    campaign batch finishes its chunk; a preparation its pages), and exits 0.
    """
    settings = state_of(ctx).settings()

    async def go() -> None:
        async with container_for(ctx) as container:
            if metrics_port is not None:
                # Job outcomes are counted where they happen: in the worker process.
                prometheus_client.start_http_server(
                    metrics_port, addr=settings.http.host, registry=container.metrics.registry
                )
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            log.info(
                "worker.started", database=container.db.dialect, provider=settings.email.provider
            )
            await container.run_workers(stop)
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
    err_console.print(f"Database at revision {', '.join(revisions) or 'base'}.")
