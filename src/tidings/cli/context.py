"""What every command shares: loading settings once, logging set-up, failing cleanly."""

from __future__ import annotations

import asyncio
import errno
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from tidings.config import ConfigurationError, Settings, load_settings
from tidings.domain.errors import DatabaseUnreachable, TidingsError
from tidings.observability.logging import configure_logging
from tidings.observability.sentry import configure_sentry

if TYPE_CHECKING:
    from tidings.bootstrap import Container

T = TypeVar("T")
EXIT_CONFIG = 2
LOG_LEVELS = ("debug", "info", "warning", "error")
# One-shot commands keep log events out of their output and progress bars unless asked.
QUIET_LOG_LEVEL = "warning"
err_console = Console(stderr=True, highlight=False)
out_console = Console(highlight=False)


@dataclass
class CliState:
    config_file: Path | None = None
    log_level: str | None = None  # --log-level, over everything
    overrides: dict[str, Any] = field(default_factory=dict)
    _settings: Settings | None = None

    def settings(self, *, long_running: bool = False) -> Settings:
        """The settings, loaded once; logging is set up then. Servers and workers log at
        log.level; other commands at warning and up, unless --log-level says otherwise."""
        if self._settings is None:
            try:
                self._settings = load_settings(self.config_file, **self.overrides)
            except ConfigurationError as exc:
                fail(str(exc), code=EXIT_CONFIG)
            level = self.log_level or self._settings.log.level
            if not self.log_level and not long_running:
                level = max(level, QUIET_LOG_LEVEL, key=LOG_LEVELS.index)
            configure_logging(level, self._settings.log.format)
            dsn = self._settings.log.sentry_dsn
            configure_sentry(dsn.get_secret_value() if dsn else None)
        return self._settings


def state_of(ctx: typer.Context) -> CliState:
    state = ctx.find_root().obj
    if not isinstance(state, CliState):
        state = CliState()
        ctx.find_root().obj = state
    return state


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now, for a local server the command starts."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def bind_port(host: str, port: int, *, setting: str) -> socket.socket:
    """A socket bound to host:port for a server this command runs, taken before anything
    starts; a port in use (or an address that cannot be had) is one line naming `setting`,
    exit code 2. Not listening yet: connections are refused until the server is ready."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: accepted connections inherit it, and asyncio sets
    # TCP_NODELAY only on sockets that say TCP. Without it every answer after the first on a
    # keep-alive connection waited 40 ms for a delayed ACK (Nagle), whatever the server did.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        cannot_listen(host, port, exc, setting=setting)
    return sock


def cannot_listen(host: str, port: int, error: OSError, *, setting: str) -> NoReturn:
    """Exit 2 with one line: the address, why it cannot be had, and what to change."""
    if error.errno == errno.EADDRINUSE:
        fail(
            f"cannot listen on {host}:{port}: the port is already in use (another tidings, "
            f"or another program). Stop that, or choose another port: {setting}.",
            code=EXIT_CONFIG,
        )
    fail(
        f"cannot listen on {host}:{port}: {error.strerror or error}. Check the address and "
        f"port: {setting}.",
        code=EXIT_CONFIG,
    )


def fail(message: str, code: int = 1) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}", soft_wrap=True)
    raise typer.Exit(code)


def run(coroutine_factory: Callable[[], Awaitable[T]]) -> T:
    """Run async work; tidings errors become a one-line message and exit code 1, a database
    that cannot be reached exit code 2 (like any configuration problem)."""

    async def guarded() -> T:
        return await coroutine_factory()

    try:
        return asyncio.run(guarded())
    except DatabaseUnreachable as exc:
        fail(exc.diagnosis, code=EXIT_CONFIG)
    except TidingsError as exc:
        field_note = f" ({exc.field})" if exc.field else ""
        # Placeholder identity is a configuration problem: the settings to change are named.
        fail(
            f"{exc.detail}{field_note}",
            code=EXIT_CONFIG if exc.code == "placeholder_identity" else 1,
        )
    except KeyboardInterrupt:
        sys.exit(130)


async def wait_for_stop_signal() -> None:
    """Return at the first SIGINT or SIGTERM, for commands that serve until stopped."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


@asynccontextmanager
async def container_for(ctx: typer.Context) -> AsyncIterator[Container]:
    """A running container for a command that reads or writes data (no auto-migration)."""
    from tidings.bootstrap import running  # the composition root, once a command runs
    from tidings.bootstrap.schema import schema_at_head

    settings = state_of(ctx).settings()
    async with running(settings, apply_migrations=False) as container:
        if not await schema_at_head(container):
            fail("the database is not migrated to the latest revision: run `tidings migrate`")
        yield container
