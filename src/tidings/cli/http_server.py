"""uvicorn for `tidings serve` and `tidings api`, and for a worker's metrics port.

Only the commands that listen for HTTP import this module (from their bodies): uvicorn, FastAPI,
the app's routes and the admin UI are about 14 MB of a process's memory that a worker without a
metrics port has no use for (issue 9).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Literal

import uvicorn
from fastapi import FastAPI

from tidings.api.app import create_app, create_metrics_app
from tidings.bootstrap import Container, build, start
from tidings.bootstrap.schema import schema_revision
from tidings.cli.banner import ServerBanner, say
from tidings.cli.context import run
from tidings.config import Settings


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
        http="httptools",  # the C parser (a dependency): server CPU per event webhook 2.2 -> 1.5 ms
        server_header=False,
        timeout_graceful_shutdown=30,
        proxy_headers=True,
        forwarded_allow_ips=settings.http.trusted_proxies,
    )


async def with_metrics(
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


def serve_app(
    settings: Settings,
    listener: socket.socket,
    url: str,
    metrics: tuple[socket.socket, str] | None,
    *,
    embedded: bool,
) -> None:
    """Serve the app on `listener` (and `/metrics` on its own socket, if given) until
    SIGTERM or Ctrl-C; `embedded` migrates first and runs the workers in this process."""
    metrics_url = (
        metrics[1] if metrics else (f"{url}/metrics" if settings.metrics.enabled else None)
    )
    container = build(settings)

    async def go() -> None:
        try:
            await start(container, apply_migrations=embedded)
            revision = await schema_revision(container)
        except BaseException:
            await container.close()
            raise
        # The app's lifespan starts the container again (migrated already: only the site
        # secret is read again) and closes it when the server stops.
        app = create_app(settings, run_workers=embedded, container=container)
        banner = ServerBanner(settings, revision, url, embedded, metrics_url)
        server = _Server(_uvicorn_config(app, settings), on_started=lambda: say(banner.lines()))
        # What is built by now lives as long as the process: out of the collector's sight,
        # so a full collection under load does not walk the whole app each time.
        gc.freeze()
        await with_metrics(
            server.serve(sockets=[listener]), metrics[0] if metrics else None, container
        )

    run(go)
