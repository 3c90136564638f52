"""`tidings bench tracking`: opens and clicks taken by one `tidings api` process (ENG-3) — a
burst of privacy-proxy opens and scanner clicks on many connections while people's clicks go on
beside it — beside a bare multi-row INSERT of the same rows into the same intake table in the
same run; then the worker's fold of those hits into the counters, and how long a
1,000,000-recipient campaign's results take to read from them (ENG-5).

A scratch database of the configured kind gets a newsletter tracked in `aggregate`, a campaign
already sent to `messages` subscribers, its stored links (the pixel, ten links, the hidden
one) and one signed token per message. `tidings api` runs in its own process on a free port.
Targets (issue 36): 5,000 hits/s and 0.5 of the bare insert on PostgreSQL, people's redirects
p99 <= 50 ms while the burst is absorbed, the results in under 100 ms.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tidings.bench import seeding, yardsticks
from tidings.bench.keepalive import percentile, send_all
from tidings.bench.local_processes import cpu_seconds, tidings_process
from tidings.bench.scratch import scratch_database
from tidings.domain.tracking import HitKind, TrackingSigner, tracked_url
from tidings.storage import migrate
from tidings.storage.campaign_links import StoredLink, store_links
from tidings.storage.database import Database, create_database
from tidings.storage.dialect import is_postgresql_url
from tidings.storage.site_secrets import get_or_create_secret

TARGET_HITS_PER_SECOND = 5000
TARGET_RATIO = 0.5
TARGET_P99_MS = 50.0
TARGET_REPORT_MS = 100.0
SEGMENT = "free"
LINKS = 10
HIDDEN = LINKS + 1
BARE_CHUNK = 1000
WARM_UP = 200  # hits sent before the clock starts
# Who the hits come from. The proxy and the scanner are what the shipped rules recognise
# (engagement/machine_rules.toml); the person reads in a desktop browser, an hour after sending.
BROWSER = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36"
)
APPLE_PROXY = "Mozilla/5.0"
SCANNER = "Mozilla/5.0 (compatible; Barracuda Sentinel (EE))"


@dataclass(frozen=True, slots=True)
class Setup:
    url: str
    secret: str
    campaign_id: int


async def _prepare(url: str, messages: int) -> Setup:
    """Migrate; seed the audience, the campaign sent to it, its links and the site secret."""
    db = create_database(url)
    try:
        await migrate.upgrade(db)
        now = datetime.now(UTC)
        async with db.write() as conn:
            secret = await get_or_create_secret(
                conn, "site", candidate=secrets.token_urlsafe(32), now=now
            )
            newsletter_id = await seeding.seed_newsletter(conn, slug="bench", now=now)
            await seeding.set_tracking(conn, newsletter_id, "aggregate")
            await seeding.seed_audience(conn, newsletter_id=newsletter_id, count=messages, now=now)
            campaign_id = await seeding.seed_sent_campaign(
                conn, newsletter_id=newsletter_id, sending_domain="bench.example.org", now=now
            )
            links = [StoredLink(0, "")]
            links += [StoredLink(n, f"https://example.org/story/{n}") for n in range(1, HIDDEN)]
            links.append(StoredLink(HIDDEN, "https://example.org/", hidden=True))
            await store_links(conn, campaign_id, SEGMENT, links, now)
        return Setup(url, secret, campaign_id)
    finally:
        await db.dispose()


def _request(url: str, user_agent: str, forwarded_for: str | None = None) -> bytes:
    path = url.split("://", 1)[1].split("/", 1)[1]
    forwarded = f"x-forwarded-for: {forwarded_for}\r\n" if forwarded_for else ""
    return (
        f"GET /{path} HTTP/1.1\r\nhost: 127.0.0.1\r\nuser-agent: {user_agent}\r\n{forwarded}\r\n"
    ).encode()


def _hits(setup: Setup, hits: int) -> tuple[list[bytes], list[bytes]]:
    """(the burst, the people): proxy opens of every message and scanner clicks on every link
    of a fifth of them, just after sending; a tenth of the hits are people's clicks."""
    signer = TrackingSigner(setup.secret)
    base = "https://news.example.org"
    now = datetime.now(UTC)
    links = [signer.link_token(setup.campaign_id, SEGMENT, n) for n in range(HIDDEN + 1)]

    def url(kind: HitKind, number: int, token: str) -> str:
        return tracked_url(base, kind, links[number], token)

    people: list[bytes] = []
    burst: list[bytes] = []
    human_share = max(1, hits // 10)
    for message in range(hits):
        # Each hit from its own /24, as a real burst comes from many networks: the per-source
        # flood rule is not what this measures.
        network = f"{message // 250 % 250}.{message % 250}"
        if len(people) < human_share and message % 10 == 0:
            token = signer.message_token(setup.campaign_id, now - timedelta(hours=1))
            link = url(HitKind.CLICK, 1 + message % LINKS, token)
            people.append(_request(link, BROWSER, f"198.{network}.7"))
            continue
        token = signer.message_token(setup.campaign_id, now)
        if message % 5:
            opened = url(HitKind.OPEN, 0, token)
            burst.append(_request(opened, APPLE_PROXY, f"17.{network}.1"))
        else:
            number = 1 + (message // 5) % (LINKS + 1)
            clicked = url(HitKind.CLICK, number, token)
            burst.append(_request(clicked, SCANNER, f"64.{network}.9"))
    return burst, people


async def _bare(url: str, rows: int) -> float:
    """Seconds to write `rows` intake rows with bare multi-row INSERTs."""
    now = datetime.now(UTC)
    values = [
        {
            "received_at": now,
            "campaign_id": 1,
            "segment": SEGMENT,
            "number": number % (LINKS + 1),
            "kind": "click" if number % 5 == 0 else "open",
            "message_key": secrets.token_urlsafe(12),
            "recipient_id": None,
            "sent_at": now,
            "verdict": "machine",
            "reason": "privacy_proxy",
            "client_family": "apple_mpp",
        }
        for number in range(rows)
    ]
    db = create_database(url)
    try:
        started = time.perf_counter()
        async with db.write() as conn:
            await yardsticks.bare_intake_insert(conn, values, chunk=BARE_CHUNK)
        return time.perf_counter() - started
    finally:
        await db.dispose()


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


async def _run_api(setup: Setup, burst: list[bytes], people: list[bytes], connections: int) -> Any:
    environment = {
        "TIDINGS_DATABASE_URL": setup.url,
        "TIDINGS_LOG_LEVEL": "warning",
        "TIDINGS_SITE_PUBLIC_URL": "https://news.example.org",
    }
    async with tidings_process("api", environment) as (port, process):
        await send_all(port, burst[:WARM_UP], 8)  # the route table, prepared statements
        cpu_before = cpu_seconds(process.pid)
        started = time.perf_counter()
        (burst_seconds, burst_answers), (_, people_answers) = await asyncio.gather(
            send_all(port, burst[WARM_UP:], connections), send_all(port, people, 4)
        )
        elapsed = time.perf_counter() - started
        cpu_after = cpu_seconds(process.pid)
    return elapsed, burst_seconds, burst_answers, people_answers, cpu_before, cpu_after


async def bench_tracking(
    configured_url: str, *, hits: int, connections: int, report_recipients: int
) -> dict[str, Any]:
    from tidings.engagement.apply import apply_all
    from tidings.engagement.results import campaign_engagement

    async with scratch_database(configured_url) as url:
        setup = await _prepare(url, 100)
        burst, people = _hits(setup, hits + WARM_UP)
        run = await _run_api(setup, burst, people, connections)
        elapsed, _burst_seconds, burst_answers, people_answers, cpu_before, cpu_after = run
        taken = len(burst) - WARM_UP + len(people)
        db = create_database(url)
        try:
            started = time.perf_counter()
            applied = await apply_all(db)
            apply_seconds = time.perf_counter() - started
            counted = (await campaign_engagement(db, setup.campaign_id)).as_json()
            report = await _report(db, campaign_engagement, report_recipients)
        finally:
            await db.dispose()
        bare_seconds = await _bare(url, taken)
    ours = taken / elapsed
    bare = taken / bare_seconds
    latencies = people_answers.latencies
    return {
        "benchmark": "tracking",
        "database": "postgresql" if is_postgresql_url(configured_url) else "sqlite",
        "hits": taken,
        "people_clicks": len(people),
        "connections": connections,
        "answers": {
            **burst_answers.counts,
            **{f"people_{k}": v for k, v in people_answers.counts.items()},
        },
        "seconds": round(elapsed, 3),
        "hits_per_second": round(ours, 1),
        "api_cpu_ms_per_hit": (
            round((cpu_after - cpu_before) * 1000 / taken, 3)
            if cpu_before is not None and cpu_after is not None
            else None
        ),
        "bare_insert_rows_per_second": round(bare, 1),
        "ratio_to_bare_insert": round(ours / bare, 3),
        "redirect_latency_ms": {
            "p50": _ms(percentile(latencies, 0.5)),
            "p99": _ms(percentile(latencies, 0.99)),
            "max": _ms(max(latencies, default=0.0)),
        },
        "applied_hits": applied,
        # How the hits were classified: the people's clicks human, the burst a machine's.
        "counted": {kind: counted[kind] for kind in ("opens", "clicks")},
        "apply_hits_per_second": round(applied / apply_seconds, 1) if apply_seconds else None,
        "report_recipients": report_recipients,
        # The campaign page's reads (delivery statistics and engagement) of a large campaign.
        **report,
        "targets": {
            "hits_per_second": TARGET_HITS_PER_SECOND,
            "ratio_to_bare_insert": TARGET_RATIO,
            "redirect_p99_ms": TARGET_P99_MS,
            "report_ms": TARGET_REPORT_MS,
        },
    }


async def _report(db: Database, read: Any, recipients: int) -> dict[str, Any]:
    """What a `recipients`-recipient campaign's page reads — its delivery statistics (stored,
    as the workers keep them for a large campaign) and its opens and clicks (counters for three
    days of hours on every link) — timed as the median of five reads; the workers' count of its
    rows beside it, and what the reads said."""
    from tidings.campaigns.statistics import StatisticsReader

    now = datetime.now(UTC)
    async with db.write() as conn:
        newsletter_id = await seeding.seed_newsletter(conn, slug="bench-report", now=now)
        await seeding.set_tracking(conn, newsletter_id, "aggregate")
        await seeding.seed_audience(conn, newsletter_id=newsletter_id, count=recipients, now=now)
        campaign_id = await seeding.seed_sent_campaign(
            conn, newsletter_id=newsletter_id, sending_domain="bench.example.org", now=now
        )
        await seeding.seed_engagement_counters(
            conn, campaign_id, segments=("free", "paid"), links=LINKS, hours=72, now=now
        )
    statistics = StatisticsReader(
        db, lambda: datetime.now(UTC), stored_above=0, interval=timedelta(seconds=15)
    )
    started = time.perf_counter()
    await statistics.count_and_store(campaign_id)
    count_seconds = time.perf_counter() - started
    pages, engagement = [], []
    result: Any = None
    for _ in range(5):
        started = time.perf_counter()
        found = await statistics.statistics(campaign_id, timeline=True)
        between = time.perf_counter()
        result = await read(db, campaign_id)
        done = time.perf_counter()
        pages.append(done - started)
        engagement.append(done - between)
    if found.counted_at is None or found.total.sent != recipients:
        raise RuntimeError("the campaign page did not read the stored count of every recipient")
    figures = result.as_json() if hasattr(result, "as_json") else {}
    return {
        "report_ms": _ms(sorted(pages)[2]),
        "report_engagement_ms": _ms(sorted(engagement)[2]),
        "report_count_ms": _ms(count_seconds),
        "report": {
            key: figures.get(key) for key in ("tracking", "opens", "clicks") if key in figures
        },
    }
