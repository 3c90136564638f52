"""tidings run as a user runs it: a one-shot command (on a test database, as an operator
would), in this process or in a process of its own, and a real `tidings serve` (or `api`) on a
free loopback port, for a browser on /docs, the start-up banner, the README tour."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import structlog
from typer.testing import CliRunner

from tests.support.waiting import wait_until
from tidings.cli.context import free_port

START_DEADLINE_SECONDS = 60.0
Cli = Callable[..., "Ran"]


@dataclass
class Served:
    """A running server: where it answers, and where its stdout and stderr go."""

    base_url: str
    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path

    def output(self) -> str:
        return self.stdout.read_text(errors="replace")

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")


def clean_env(**settings: str) -> dict[str, str]:
    """The environment without the developer's TIDINGS_*, plus `settings` (`DATABASE_URL=...`)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    return {**clean, **{f"TIDINGS_{key}": value for key, value in settings.items()}}


@dataclass
class Ran:
    """What a `tidings` command did: its exit code and what it printed (as a process would)."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        """Both streams, as a terminal shows them."""
        return self.stdout + self.stderr


def tidings(
    *args: str,
    env: dict[str, str] | None = None,
    input: str | None = None,
    timeout: float = 120,
) -> Ran:
    """`tidings ARGS` run in this process through Typer's CliRunner, with `env` as its whole
    environment (default: the test process's, without TIDINGS_*): the same command tree,
    exit codes and output as `python -m tidings`, without two seconds of interpreter start-up
    and imports per call. Tests of the process itself (signals, imports, start-up) use
    `tidings_process`. Inside a running event loop (an async test) the command runs on a
    thread of its own, the loop blocked meanwhile, as `subprocess.run` would block it."""
    environ = env if env is not None else clean_env()
    if not _in_event_loop():
        return _invoke(args, environ, input)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(_invoke, args, environ, input).result(timeout=timeout)


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _invoke(args: tuple[str, ...], environ: dict[str, str], given: str | None) -> Ran:
    from tidings.cli.main import app

    # CliRunner sets what it is given (None removes); the rest of os.environ stays.
    changes: dict[str, str | None] = {
        key: value for key, value in environ.items() if os.environ.get(key) != value
    }
    changes |= {key: None for key in os.environ if key not in environ}
    with logging_restored(), _INVOKING:
        result = CliRunner().invoke(app, list(args), env=changes, input=given)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))  # as Python would print
    return Ran(result.exit_code, result.stdout, stderr)


_INVOKING = threading.Lock()


@contextmanager
def logging_restored() -> Iterator[None]:
    """Logging as it was before the block: structlog's configuration and every stdlib
    logger's handlers, level and flags. Commands (and tests that configure logging) point
    it at a stream of their own — CliRunner's captured stderr, pytest's capture of one test
    — which is closed afterwards; a later test in the same process logging into it failed
    with "I/O operation on closed file"."""
    structlog_config = structlog.get_config()
    names = ["", *logging.Logger.manager.loggerDict]
    loggers = {
        name: (logger.handlers[:], logger.level, logger.propagate, logger.disabled)
        for name, logger in ((name, logging.getLogger(name)) for name in names)
    }
    try:
        yield
    finally:
        structlog.configure(**structlog_config)
        for name in logging.Logger.manager.loggerDict:
            if name not in loggers:  # made during the command: it writes to no stream of ours
                logging.getLogger(name).handlers = []
        for name, (handlers, level, propagate, disabled) in loggers.items():
            logger = logging.getLogger(name)
            logger.handlers, logger.level = handlers, level
            logger.propagate, logger.disabled = propagate, disabled


def tidings_process(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    input: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`python -m tidings ARGS` in a process of its own, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "tidings", *args],
        env=env if env is not None else clean_env(),
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=None if input is not None else subprocess.DEVNULL,
    )


def tidings_cli(database_url: str, **environ: str) -> Cli:
    """`tidings ARGS…` on `database_url`, logging JSON, with none of the developer's own
    `TIDINGS_*` settings; `environ` are extra environment variables by their full names
    (`TIDINGS_EMAIL_PROVIDER`, `BROWSER`)."""
    env = {**clean_env(DATABASE_URL=database_url, LOG_FORMAT="json"), **environ}
    return functools.partial(tidings, env=env)


@contextmanager
def serve_process(
    workdir: Path, *args: str, command: str = "serve", env: dict[str, str] | None = None
) -> Iterator[Served]:
    """`python -m tidings COMMAND --port P ARGS` in `workdir`, waited for until /healthz
    answers, stopped with SIGTERM (then killed) at the end of the block."""
    port = free_port()
    stdout, stderr = workdir / f"{command}-{port}.out", workdir / f"{command}-{port}.err"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "tidings", command, "--port", str(port), *args],
            cwd=workdir,
            env=env if env is not None else clean_env(),
            stdout=out,
            stderr=err,
        )
    served = Served(f"http://127.0.0.1:{port}", process, stdout, stderr)
    try:
        _wait_until_up(served)
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_up(served: Served) -> None:
    def answering() -> bool:
        if served.process.poll() is not None:
            raise AssertionError(f"the server exited ({served.process.returncode}): {served.log()}")
        try:
            return httpx.get(f"{served.base_url}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(answering, within_seconds=START_DEADLINE_SECONDS, message="the server is not up")
