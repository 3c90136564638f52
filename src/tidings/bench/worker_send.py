"""The tidings side of `tidings bench send` (BEN-2): an audience seeded in SQL, the sample
issue queued to it, real `tidings worker` processes sending it, and what they did: the rate
from the first batch claimed to the last finished, the workers' peak memory and CPU, the
database's growth and WAL, and the accounting and the provider's accepted addresses counted
in SQL, never in the bench's memory."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidings.audience.newsletters import NewsletterFields
from tidings.bench import readings, seeding
from tidings.bench.bare_process import peak_rss_mb
from tidings.bench.local_processes import cpu_seconds
from tidings.bench.provider_checks import accepted_at_provider, log_size
from tidings.bootstrap import Container, running
from tidings.campaigns.commands import DraftFields
from tidings.config import load_settings
from tidings.domain.sending import RecipientState
from tidings.rendering.sample import sample_content


@dataclass
class _Watched:
    """What watching the workers until the send ended gave: its last status, the wall time
    from their start, their peak memory, and their CPU when it was prepared and at the end."""

    status: str
    wall: float
    rss: list[float | None]
    cpu_at_prepared: list[float | None] | None
    cpu_done: list[float | None]


@dataclass
class _Reading:
    """The database's size and, on PostgreSQL, its WAL position and next transaction id."""

    size: int
    wal: int | None
    xid: int | None


async def _seeded_campaign(container: Container, count: int) -> tuple[int, _Reading]:
    """An audience of `count` and the sample issue sent to it (queued, not yet prepared);
    its id and the database's size and WAL position once the audience is in."""
    content = sample_content()
    newsletter = await container.newsletters.create(
        NewsletterFields(
            slug="bench", name="Bench", sender_name="Bench", sender_address="bench@example.org"
        )
    )
    async with container.db.write() as conn:
        await seeding.seed_audience(
            conn, newsletter_id=newsletter.id, count=count, now=container.sending.now()
        )
    async with container.db.read() as conn:
        seeded = _Reading(
            await readings.database_bytes(conn), await readings.wal_position(conn), None
        )
    draft = await container.campaigns.create(
        "bench",
        DraftFields(
            subject=content.subject,
            preheader=content.preheader,
            body=content.body,
            body_format=content.body_format,
        ),
    )
    await container.sends.send(draft.campaign.id)
    return draft.campaign.id, seeded


def _worker_environment(url: str, worker_env: dict[str, str]) -> dict[str, str]:
    """This process's environment without its own TIDINGS_ settings, the scratch database's
    and the provider's in their place."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    return {
        **clean,
        "TIDINGS_DATABASE_URL": url,
        "TIDINGS_LOG_LEVEL": "warning",
        "TIDINGS_LOG_FORMAT": "json",
        **worker_env,
    }


async def _watch_workers(
    container: Container, campaign_id: int, workers: int, env: dict[str, str]
) -> _Watched:
    """Start `workers` worker processes and poll the campaign until it is submitted or failed;
    the workers are stopped (SIGTERM) before this returns."""
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tidings",
            "worker",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        for _ in range(workers)
    ]
    started = time.perf_counter()
    cpu_at_prepared: list[float | None] | None = None
    try:
        while True:
            status = (await container.campaigns.get(campaign_id)).campaign.status
            if status in ("submitted", "failed"):
                break
            if cpu_at_prepared is None:
                prepared = await container.sends.get_send(campaign_id)
                if prepared is not None and prepared.prepared_at is not None:
                    cpu_at_prepared = [cpu_seconds(process.pid) for process in processes]
            await asyncio.sleep(0.2)
        wall = time.perf_counter() - started
        rss = [peak_rss_mb(process.pid) for process in processes]
        cpu_done = [cpu_seconds(process.pid) for process in processes]
    finally:
        for process in processes:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            await process.wait()
    return _Watched(status, wall, rss, cpu_at_prepared, cpu_done)


async def tidings_send(
    url: str, count: int, workers: int, worker_env: dict[str, str], *, accepted: Path | None
) -> dict[str, Any]:
    """A real campaign: seeded audience, queued send, `workers` worker processes configured
    by `worker_env` (the provider). Rate from the first batch claimed to the last finished.
    With `accepted`, the file the provider logs accepted addresses to (`bench.lean_servers`):
    what it gains during the send, counted in SQL, is `at_provider`."""
    settings = load_settings(database={"url": url}, log={"level": "warning", "format": "json"})
    async with running(settings, apply_migrations=True) as container:
        campaign_id, seeded = await _seeded_campaign(container, count)
        env = _worker_environment(url, worker_env)
        async with container.db.read() as conn:
            seeded.xid = await readings.next_transaction_id(conn)
        # The provider has answered every earlier request: what it accepts from the workers
        # is what its log gains from here.
        before = None if accepted is None else log_size(accepted)
        watched = await _watch_workers(container, campaign_id, workers, env)
        window = await container.sends.submission_window(campaign_id)
        send = await container.sends.get_send(campaign_id)
        async with container.db.read() as conn:
            sent = _Reading(
                await readings.database_bytes(conn),
                await readings.wal_position(conn),
                await readings.next_transaction_id(conn),
            )
            batches = await readings.batch_count(conn, campaign_id)
            states = await readings.recipient_states(conn, campaign_id)
    assert send is not None
    at_provider = (
        None
        if accepted is None or before is None
        else await accepted_at_provider(url, accepted, before, log_size(accepted))
    )
    seconds = window.total_seconds() if window else watched.wall
    return {
        "status": watched.status,
        "recipients": count,
        "sent": send.email_count,
        "workers": workers,
        "submission_seconds": round(seconds, 3),
        "wall_seconds_with_preparation": round(watched.wall, 3),
        "per_second": round(count / seconds, 1) if seconds else None,
        "per_second_per_worker": round(count / seconds / workers, 1) if seconds else None,
        "worker_peak_rss_mb": watched.rss,
        # Counted by the database, never in the bench: every reader's row, and those in a
        # final state (neither pending nor in flight).
        "recipients_by_state": states,
        "accounted": sum(rows for state, rows in states.items() if state not in _UNSETTLED),
        **_database_figures(seeded, sent, count, batches),
        # CPU the workers spent per recipient once the campaign was prepared: unlike the rate,
        # barely moved by other load on the machine, so it compares runs on a busy host.
        "worker_cpu_us_per_recipient": _cpu_per_recipient(
            watched.cpu_at_prepared, watched.cpu_done, count
        ),
        # Accepted by the provider, distinct, and twice or more: counted in SQL (None when it
        # logs nothing).
        "at_provider": at_provider,
    }


_UNSETTLED = frozenset({RecipientState.PENDING.value, RecipientState.SENDING.value})


def _database_figures(seeded: _Reading, sent: _Reading, count: int, batches: int) -> dict[str, Any]:
    wal = None if seeded.wal is None or sent.wal is None else sent.wal - seeded.wal
    return {
        # What the send itself added (preparation, recipient rows, batches, jobs): seeded
        # audience before, the database once the campaign is submitted after.
        "database_mb_with_audience": round(seeded.size / 2**20, 1),
        "database_growth_mb": round((sent.size - seeded.size) / 2**20, 1),
        "database_growth_bytes_per_recipient": round((sent.size - seeded.size) / count),
        # Write-ahead log the send wrote (PostgreSQL; this server's other databases too).
        "wal_bytes_per_recipient": None if wal is None else round(wal / count),
        # Writing transactions from the workers' start to the end (PostgreSQL; preparation,
        # batches, the queue's own, and this server's other databases too) per batch.
        "batches": batches,
        "write_transactions_per_batch": (
            None
            if seeded.xid is None or sent.xid is None or not batches
            else round((sent.xid - seeded.xid) / batches, 2)
        ),
    }


def _cpu_per_recipient(
    before: list[float | None] | None, after: list[float | None], count: int
) -> float | None:
    if before is None or None in before or None in after or not count:
        return None
    spent = sum(a or 0.0 for a in after) - sum(b or 0.0 for b in before)
    if spent <= 0:
        # Under one clock tick (10 ms): a send this small is below what /proc can measure.
        return None
    return round(spent / count * 1_000_000, 1)
