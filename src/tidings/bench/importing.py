"""`tidings bench import`: CSV import rows per second (AUD-9: 100,000 rows in seconds), on a
scratch database of the configured kind, with a realistic generated file."""

from __future__ import annotations

import io
import random
import resource
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from tidings.audience.context import AudienceContext
from tidings.audience.import_chunks import ImportReport
from tidings.audience.importer import Importer
from tidings.bench import seeding
from tidings.bench.scratch import scratch_database
from tidings.bootstrap import queue_policy, utcnow
from tidings.config import QueueSettings
from tidings.domain.jobs import JobStatus
from tidings.outbound.email_jobs import Mailer
from tidings.outbound.webhooks import DELIVER_WEBHOOK, Webhooks
from tidings.queue import store as job_store
from tidings.queue.service import JobQueue
from tidings.rendering import TemplateEngine
from tidings.storage import migrate
from tidings.storage.database import Database, create_database

NEWSLETTER = "bench"
FIRST_NAMES = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia")
LAST_NAMES = ("Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Perlman")
DOMAINS = ("example.org", "example.com", "example.net", "mail.example.org")
LABELS = ("beta", "vip", "events", "press", "2023-conference", "partner")
TIERS = (("", 30), ("free", 50), ("paid", 15), ("comped", 5))
STATUSES = (("confirmed", 70), ("pending", 20), ("unsubscribed", 10))


def generate_csv(rows: int, *, seed: int = 7) -> str:
    """A file like a real export from another platform: names (some blank), mixed tiers and
    statuses, a few labels, creation dates over the last five years. Deterministic."""
    pick = random.Random(seed)
    tiers = [tier for tier, weight in TIERS for _ in range(weight)]
    statuses = [status for status, weight in STATUSES for _ in range(weight)]
    start = datetime(2021, 1, 1, tzinfo=UTC)
    out = io.StringIO()
    out.write("email,name,tier,labels,newsletter,status,created_at\n")
    for number in range(rows):
        first, last = pick.choice(FIRST_NAMES), pick.choice(LAST_NAMES)
        name = "" if pick.random() < 0.2 else f"{first} {last}"
        labels = ";".join(pick.sample(LABELS, pick.choice((0, 0, 0, 1, 1, 2))))
        created = start + timedelta(minutes=pick.randrange(5 * 365 * 24 * 60))
        out.write(
            f"{first.lower()}.{last.lower()}.{number}@{pick.choice(DOMAINS)},{name},"
            f"{pick.choice(tiers)},{labels},,{pick.choice(statuses)},"
            f"{created:%Y-%m-%dT%H:%M:%SZ}\n"
        )
    return out.getvalue()


def _context(db: Database) -> AudienceContext:
    queue = JobQueue(db, queue_policy(QueueSettings()), utcnow)
    return AudienceContext(
        db=db,
        now=utcnow,
        secret=lambda: "bench-secret",
        mailer=Mailer(db, queue),
        webhooks=Webhooks(db, queue, utcnow, rotation_overlap=timedelta(hours=1)),
        queue=queue,
        public_url="https://bench.invalid",
        site_name="bench",
        confirm_token_ttl_hours=48,
        templates=TemplateEngine(),
    )


async def _create_newsletter(db: Database) -> None:
    async with db.write() as conn:
        await seeding.seed_newsletter(conn, slug=NEWSLETTER, now=utcnow())


async def _timed_imports(
    configured_url: str, text: str, *, endpoints: int
) -> tuple[list[tuple[float, ImportReport]], int, str]:
    """Import `text` into an empty scratch database with `endpoints` webhook endpoints
    subscribed to every event (`*`, imports included), then the same file again; the two
    timings and reports, the webhook deliveries queued (no worker runs: they wait), and the
    database's dialect."""
    async with scratch_database(configured_url) as url:
        db = create_database(url, pool_size=2)
        try:
            await migrate.upgrade(db)
            await _create_newsletter(db)
            context = _context(db)
            for number in range(endpoints):
                await context.webhooks.create_endpoint(f"https://hooks{number}.invalid/in", ["*"])
            importer = Importer(context)
            timings = []
            for _ in range(2):
                started = time.perf_counter()
                report = await importer.import_csv(
                    io.StringIO(text, newline=""), newsletter_slug=NEWSLETTER, actor="bench"
                )
                timings.append((time.perf_counter() - started, report))
            async with db.read() as conn:
                queued = await job_store.count(conn, kind=DELIVER_WEBHOOK, status=JobStatus.PENDING)
        finally:
            await db.dispose()
    return timings, queued, db.dialect


async def bench_import(configured_url: str, *, rows: int, webhooks: int = 0) -> dict[str, Any]:
    """Import `rows` generated rows into an empty scratch database, then the same file again
    (the idempotent re-import, which writes nothing). With `webhooks`, the same again on a
    fresh database with that many `*` endpoints, in the same run, and the ratio of the two
    first imports."""
    text = generate_csv(rows)
    ((seconds, first), (reimport_seconds, second)), _, dialect = await _timed_imports(
        configured_url, text, endpoints=0
    )
    result: dict[str, Any] = {
        "benchmark": "import",
        "database": dialect,
        "rows": rows,
        "seconds": round(seconds, 3),
        "rows_per_second": round(rows / seconds, 1),
        "created": first.created,
        "errors": first.failed_rows,
        "reimport_seconds": round(reimport_seconds, 3),
        "reimport_unchanged": second.unchanged,
    }
    if webhooks:
        (hooked_run, hooked_reimport), queued, _ = await _timed_imports(
            configured_url, text, endpoints=webhooks
        )
        (hooked_seconds, hooked), (hooked_reimport_seconds, _) = hooked_run, hooked_reimport
        result["webhooks"] = {
            "endpoints": webhooks,
            "seconds": round(hooked_seconds, 3),
            "rows_per_second": round(rows / hooked_seconds, 1),
            "created": hooked.created,
            "deliveries_queued": queued,
            "reimport_seconds": round(hooked_reimport_seconds, 3),
            "ratio": round(hooked_seconds / seconds, 2),
        }
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    result["note"] = "the generated file is held in memory; peak RSS includes it"
    return result
