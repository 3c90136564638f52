"""Real `tidings worker` processes for end-to-end send tests: their environment (an SMTP sink,
short leases), starting and stopping them, and a campaign queued for them to send."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from tests.factories import api_client, make_settings
from tests.support.sending import queued_send
from tidings.bootstrap import Container, utcnow
from tidings.devservers.sink import Faults, SmtpSink

LEASE_SECONDS = 2.0
IN_FLIGHT_CHUNK = 20
BATCHES_PER_WORKER = 2


def worker_env(database_url: str, sink: SmtpSink, **settings: str) -> dict[str, str]:
    """The environment of a worker sending to `sink`; `settings` are extra `TIDINGS_*`
    variables by key (`BULK_EMAIL_BATCH_SIZE="200"`)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    return {
        **clean,
        "TIDINGS_DATABASE_URL": database_url,
        "TIDINGS_LOG_FORMAT": "json",
        "TIDINGS_LOG_LEVEL": "warning",
        "TIDINGS_EMAIL_PROVIDER": "smtp",
        "TIDINGS_SMTP_HOST": "127.0.0.1",
        "TIDINGS_SMTP_PORT": str(sink.port),
        "TIDINGS_SMTP_SECURITY": "none",
        "TIDINGS_SMTP_POOL_SIZE": "8",
        # Every send deadline must sit inside 80% of the lease, the unused provider's too.
        "TIDINGS_EMAIL_SEND_DEADLINE_SECONDS": "1.5",
        "TIDINGS_WEBHOOKS_DEADLINE_SECONDS": "1.5",
        "TIDINGS_MAILGUN_TIMEOUT_SECONDS": "1.5",
        "TIDINGS_QUEUE_LEASE_SECONDS": str(LEASE_SECONDS),
        "TIDINGS_QUEUE_POLL_INTERVAL_SECONDS": "0.05",
        "TIDINGS_QUEUE_BACKOFF_BASE_SECONDS": "0.1",
        "TIDINGS_QUEUE_BACKOFF_MAX_SECONDS": "0.5",
        "TIDINGS_QUEUE_MAX_ATTEMPTS": "50",
        "TIDINGS_BULK_EMAIL_IN_FLIGHT_CHUNK": str(IN_FLIGHT_CHUNK),
        "TIDINGS_BULK_EMAIL_CONCURRENCY": str(BATCHES_PER_WORKER),
        **{f"TIDINGS_{key}": value for key, value in settings.items()},
    }


@asynccontextmanager
async def worker_process(
    env: dict[str, str], *, log: Path | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`python -m tidings worker`, its log (stderr) written to `log` if given, killed at the
    end of the block if still running."""
    with contextlib.ExitStack() as files:
        stderr = files.enter_context(log.open("ab")) if log else asyncio.subprocess.DEVNULL
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tidings",
            "worker",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=stderr,
        )
        try:
            yield process
        finally:
            if process.returncode is None:
                process.kill()
            await process.wait()


def tail(log: Path, lines: int = 15) -> str:
    """The end of a worker's log, for an assertion message."""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""


@asynccontextmanager
async def campaign_ready(
    database_url: str, audience: int, *, faults: Faults | None = None
) -> AsyncIterator[tuple[Container, SmtpSink, int]]:
    """A queued campaign to `audience` confirmed readers and a sink that keeps messages in
    memory (misbehaving as `faults` say); the test's own process runs no workers."""
    settings = make_settings(database_url)
    async with (
        api_client(settings) as (client, container),
        SmtpSink(clock=utcnow, port=0, faults=faults) as sink,
    ):
        yield container, sink, await queued_send(client, container, audience)


def delivered(sink: SmtpSink) -> Counter[str]:
    """How many messages each address received."""
    return Counter(address for message in sink.messages for address in message.recipients)
