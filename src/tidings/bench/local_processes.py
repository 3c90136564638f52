"""Processes a benchmark starts on loopback and reads from outside: the SMTP sink (Postfix
`smtp-sink` when found, else `tidings dev-smtp`'s server) and `tidings dev-provider`'s app,
both as `tidings bench send` runs them (`bench.lean_servers`: keeping no message), `tidings
COMMAND` servers, a wait for a port to answer, and a process's CPU time."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

POSTFIX_ROOT_ENV = "TIDINGS_BENCH_POSTFIX_ROOT"
DEFAULT_POSTFIX_ROOT = Path.home() / ".cache" / "tidings" / "postfix"
POSTFIX_SINK = "postfix smtp-sink"


def postfix_root() -> Path | None:
    """Where `smtp-sink` was unpacked (`apt-get download postfix` then `dpkg -x DEB ROOT`)."""
    root = Path(os.environ.get(POSTFIX_ROOT_ENV, DEFAULT_POSTFIX_ROOT))
    return root if (root / "usr/sbin/smtp-sink").is_file() else None


@asynccontextmanager
async def smtp_sink(
    prefer_postfix: bool, log: Path
) -> AsyncIterator[tuple[str, int, asyncio.subprocess.Process]]:
    """A sink on loopback in its own process: Postfix `smtp-sink` if available, else `tidings
    dev-smtp`'s server keeping no message but appending each recipient to `log`
    (`bench.lean_servers`). Yields its name, its port (once it listens) and the process."""
    port = free_port()
    root = postfix_root() if prefer_postfix else None
    if root is None:
        arguments = ["-m", "tidings.bench.lean_servers", "smtp", str(port), str(log)]
        async with _listening([sys.executable, *arguments], port) as process:
            yield "tidings dev-smtp (aiosmtpd)", port, process
        return
    command = [str(root / "usr/sbin/smtp-sink")]
    if os.geteuid() == 0:
        command += ["-u", "nobody"]
    command += [f"127.0.0.1:{port}", "1000"]
    environment = {"LD_LIBRARY_PATH": str(root / "usr/lib/postfix")}
    async with _listening(command, port, environment) as process:
        yield POSTFIX_SINK, port, process


@asynccontextmanager
async def tidings_process(
    command: str, environment: dict[str, str] | None = None
) -> AsyncIterator[tuple[int, asyncio.subprocess.Process]]:
    """`tidings COMMAND --port P` in its own process on a free loopback port, its output
    discarded; yields the port (once it listens) and the process, terminated on exit."""
    port = free_port()
    arguments = [sys.executable, "-m", "tidings", command, "--port", str(port)]
    async with _listening(arguments, port, environment) as process:
        yield port, process


@asynccontextmanager
async def dev_provider_process(
    log: Path,
) -> AsyncIterator[tuple[int, asyncio.subprocess.Process]]:
    """`tidings dev-provider`'s app in its own process on a free loopback port, keeping no
    recipient but appending each accepted address to `log` (`bench.lean_servers`); yields
    the port (once it listens) and the process, terminated on exit."""
    port = free_port()
    arguments = ["-m", "tidings.bench.lean_servers", "provider", str(port), str(log)]
    async with _listening([sys.executable, *arguments], port) as process:
        yield port, process


@asynccontextmanager
async def _listening(
    command: list[str], port: int, environment: dict[str, str] | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`command` in its own process, its output discarded, once it listens on `port`;
    terminated on exit."""
    process = await asyncio.create_subprocess_exec(
        *command,
        env=None if environment is None else {**os.environ, **environment},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await wait_for_port(port)
        yield process
    finally:
        process.terminate()
        await process.wait()


def free_port() -> int:
    """A loopback port nothing listens on right now, for a server the benchmark starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_for_port(port: int) -> None:
    for _ in range(400):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.05)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU the process has used so far (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
