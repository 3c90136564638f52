"""Runs the batch-provider dev server under uvicorn as a task in the caller's event loop, for
tests, benchmarks and `tidings dev-provider`.

The listening socket is bound here, before uvicorn starts: port 0 then yields the real port at
once, and a port in use is a plain `OSError` rather than uvicorn's `sys.exit`. A test shares
one event loop with the server it talks to.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import uvicorn

from tidings.delivery.served import Served
from tidings.devservers.dev_events import EventPoster
from tidings.devservers.dev_faults import Fault, FaultPlan
from tidings.devservers.dev_provider import DevProviderApp
from tidings.devservers.dev_store import DevStore

# Far above any client's keep-alive expiry (httpx: 5 s), so the client always closes an idle
# connection first and never sends a request into one the server is closing.
KEEP_ALIVE_SECONDS = 75


class DevProviderServer(Served):
    """The dev server on `host:port`. `store` holds what it accepted; `faults` what it does
    wrong (replace them while it runs); `stats` counts requests by outcome."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        store_dir: Path | None = None,
        faults: Iterable[Fault] = (),
        seed: int | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.store = DevStore(store_dir)
        self.faults = FaultPlan(faults, seed=seed)
        self.app = DevProviderApp(self.store, self.faults, api_key=api_key)
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def stats(self) -> dict[str, int]:
        return dict(self.app.stats)

    def post_events_to(
        self, url: str, signing_key: str, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> EventPoster:
        """Post signed Mailgun events for what it accepts to `url` (see `dev_events.py`)."""
        self.app.events = EventPoster(url, signing_key, transport=transport)
        return self.app.events

    async def start(self) -> None:
        """Listen and serve in the background; returns once requests are answered."""
        if self._task is not None:
            return
        server, listener = self._prepare()
        self._server = server
        self._task = asyncio.create_task(server.serve(sockets=[listener]))
        while not server.started:
            if self._task.done():
                await self._task
                raise RuntimeError("the dev provider stopped while starting")
            await asyncio.sleep(0.005)

    async def stop(self) -> None:
        """Stop listening and close connections; a request still sleeping is cut short."""
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        task, self._task, self._server = self._task, None, None
        await task
        if self.app.events is not None:
            await self.app.events.close()

    def _prepare(self) -> tuple[uvicorn.Server, socket.socket]:
        listener = _listen(self.host, self.port)
        self.port = listener.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            http="h11",
            ws="none",
            server_header=False,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            timeout_graceful_shutdown=1,
        )
        return _Server(config), listener


class _Server(uvicorn.Server):
    """uvicorn's server without its signal handlers: whoever runs it decides when it stops
    (uvicorn's would swallow Ctrl-C in a test run and raise it again on the way out)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _listen(host: str, port: int) -> socket.socket:
    # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY only on sockets that say so, and without
    # it the answer's second write waits ~40 ms for a delayed ACK (socket.create_server says 0).
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(2048)
    except BaseException:
        listener.close()
        raise
    return listener


@asynccontextmanager
async def run_dev_provider(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    api_key: str | None = None,
    store_dir: Path | None = None,
    faults: Iterable[Fault] = (),
) -> AsyncIterator[DevProviderServer]:
    """`async with run_dev_provider() as server:` a running dev server at `server.base_url`."""
    async with DevProviderServer(
        host=host, port=port, api_key=api_key, store_dir=store_dir, faults=faults
    ) as server:
        yield server
