"""tidings run as a user runs it: a one-shot command in a subprocess (on a test database, as an
operator would), and a real `tidings serve` (or `api`) on a free loopback port, for a browser
on /docs, the start-up banner, the README tour."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tidings.cli.context import free_port

START_DEADLINE_SECONDS = 60.0
Cli = Callable[..., subprocess.CompletedProcess[str]]


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


def tidings(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python -m tidings ARGS`, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "tidings", *args],
        env=env if env is not None else clean_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
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
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            raise AssertionError(f"the server exited ({served.process.returncode}): {served.log()}")
        try:
            if httpx.get(f"{served.base_url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the server did not answer within {START_DEADLINE_SECONDS}s")
