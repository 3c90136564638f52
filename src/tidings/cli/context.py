"""What every command shares: loading settings once, logging set-up, failing cleanly."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console

from tidings.bootstrap import Container, running
from tidings.config import ConfigurationError, Settings, load_settings
from tidings.domain.errors import TidingsError
from tidings.observability.logging import configure_logging
from tidings.observability.sentry import configure_sentry
from tidings.storage import migrate

T = TypeVar("T")
EXIT_CONFIG = 2
err_console = Console(stderr=True, highlight=False)
out_console = Console(highlight=False)


@dataclass
class CliState:
    config_file: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    _settings: Settings | None = None

    def settings(self) -> Settings:
        if self._settings is None:
            try:
                self._settings = load_settings(self.config_file, **self.overrides)
            except ConfigurationError as exc:
                fail(str(exc), code=EXIT_CONFIG)
            configure_logging(self._settings.log.level, self._settings.log.format)
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


def fail(message: str, code: int = 1) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}", soft_wrap=True)
    raise typer.Exit(code)


def run(coroutine_factory: Callable[[], Awaitable[T]]) -> T:
    """Run async work; tidings errors become a one-line message and exit code 1."""

    async def guarded() -> T:
        return await coroutine_factory()

    try:
        return asyncio.run(guarded())
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
    settings = state_of(ctx).settings()
    async with running(settings, apply_migrations=False) as container:
        if not await migrate.is_at_head(container.db):
            fail("the database is not migrated to the latest revision: run `tidings migrate`")
        yield container
