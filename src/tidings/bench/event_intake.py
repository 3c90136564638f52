"""`tidings bench events`: how fast one API process takes a campaign's aftermath (PRV-6) —
signed Mailgun `delivered` events posted over loopback to `tidings api`, each verified,
recorded once, tied to its recipient row and folded into the recipient's outcome — beside a bare
multi-row INSERT of the same rows into the same table in the same run.

A scratch database of the configured kind gets `events` subscribers and a campaign already sent
to them all; `tidings api` runs in its own process on a free port; `connections` clients
post one event per request, as Mailgun does. The target (issue 22): 2,000 events/s and at
least 0.25 of the bare insert, on PostgreSQL.
"""

from __future__ import annotations

import json
import secrets
import time
from datetime import UTC, datetime
from typing import Any

from tidings.bench import readings, seeding, yardsticks
from tidings.bench.keepalive import send_all
from tidings.bench.local_processes import cpu_seconds, tidings_process
from tidings.bench.scratch import scratch_database
from tidings.delivery.mailgun_events import event_data, signed_body
from tidings.domain.email_headers import message_id
from tidings.storage import migrate
from tidings.storage.database import create_database
from tidings.storage.dialect import is_postgresql_url

TARGET_EVENTS_PER_SECOND = 2000
TARGET_RATIO = 0.25
DOMAIN = "mg.bench.example.org"
BARE_CHUNK = 1000
PATH = "/api/events/mailgun"
# Events posted before the clock starts, to subscribers of their own: the first requests build
# what a running server has built long before (the OpenAPI route table, prepared statements).
WARM_UP = 200


async def _prepare(url: str, events: int) -> int:
    """Migrate, seed `events` subscribers and a campaign sent to them; the campaign id."""
    db = create_database(url)
    try:
        await migrate.upgrade(db)
        now = datetime.now(UTC)
        async with db.write() as conn:
            newsletter_id = await seeding.seed_newsletter(conn, slug="bench", now=now)
            await seeding.seed_audience(conn, newsletter_id=newsletter_id, count=events, now=now)
            return await seeding.seed_sent_campaign(
                conn, newsletter_id=newsletter_id, sending_domain=DOMAIN, now=now
            )
    finally:
        await db.dispose()


def _bodies(key: str, campaign_id: int, events: int) -> list[bytes]:
    """One signed `delivered` event for each of subscribers 1..`events`."""
    now = datetime.now(UTC)
    bodies = []
    for number in range(1, events + 1):
        address = f"reader-{number}@example.test"
        data = event_data(
            "delivered",
            address,
            event_id=secrets.token_urlsafe(16),
            occurred_at=now,
            message_id=message_id(str(campaign_id), address, DOMAIN),
            code=250,
        )
        bodies.append(signed_body(key, data, now=now))
    return bodies


def _requests(bodies: list[bytes]) -> list[bytes]:
    """Each body as one POST, as a Mailgun sender makes it."""
    return [
        (
            f"POST {PATH} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode()
        + body
        for body in bodies
    ]


def _outcome_of(status: str, answer: bytes) -> str:
    """`outcome` of a JSON answer that has it, else the status code."""
    try:
        parsed = json.loads(answer)
    except ValueError:
        return status
    return str(parsed["outcome"]) if isinstance(parsed, dict) and "outcome" in parsed else status


async def _bare(url: str, events: int) -> float:
    """Seconds to write `events` received-event rows with bare multi-row INSERTs."""
    now = datetime.now(UTC)
    rows = [
        {
            "source": "bench-bare",
            "event_key": secrets.token_urlsafe(16),
            "kind": "delivered",
            "status": "applied",
            "email_hash": f"bench-{number}",
            "occurred_at": now,
            "code": "250",
            "received_at": now,
        }
        for number in range(events)
    ]
    db = create_database(url)
    try:
        started = time.perf_counter()
        async with db.write() as conn:
            await yardsticks.bare_event_insert(conn, rows, chunk=BARE_CHUNK)
        return time.perf_counter() - started
    finally:
        await db.dispose()


async def _count_applied(url: str) -> int:
    db = create_database(url)
    try:
        async with db.read() as conn:
            return await readings.applied_event_count(conn, "mailgun")
    finally:
        await db.dispose()


async def bench_events(configured_url: str, *, events: int, connections: int) -> dict[str, Any]:
    key = secrets.token_hex(16)
    async with scratch_database(configured_url) as url:
        warm_up = min(WARM_UP, events)
        campaign_id = await _prepare(url, warm_up + events)
        bodies = _bodies(key, campaign_id, warm_up + events)
        environment = {
            "TIDINGS_DATABASE_URL": url,
            "TIDINGS_MAILGUN_WEBHOOK_SIGNING_KEY": key,
            "TIDINGS_LOG_LEVEL": "warning",
        }
        async with tidings_process("api", environment) as (port, process):
            requests = _requests(bodies)
            _, warm_up_answers = await send_all(port, requests[:warm_up], connections, _outcome_of)
            cpu_before = cpu_seconds(process.pid)
            elapsed, answers = await send_all(port, requests[warm_up:], connections, _outcome_of)
            cpu_after = cpu_seconds(process.pid)
        applied = await _count_applied(url) - warm_up_answers.counts.get("applied", 0)
        bare_seconds = await _bare(url, events)
    ours = events / elapsed
    bare = events / bare_seconds
    ratio = round(ours / bare, 3)
    return {
        "benchmark": "events",
        "database": "postgresql" if is_postgresql_url(configured_url) else "sqlite",
        "events": events,
        "connections": connections,
        "warm_up_events": warm_up,
        "outcomes": answers.counts,
        "applied_rows": applied,
        "seconds": round(elapsed, 3),
        "events_per_second": round(ours, 1),
        # The API process's own CPU an event: steadier than the rate on a shared machine.
        "api_cpu_ms_per_event": (
            round((cpu_after - cpu_before) * 1000 / events, 3)
            if cpu_before is not None and cpu_after is not None
            else None
        ),
        "bare_insert_rows_per_second": round(bare, 1),
        "ratio_to_bare_insert": ratio,
        "target_events_per_second": TARGET_EVENTS_PER_SECOND,
        "target_ratio": TARGET_RATIO,
        "within_target": ours >= TARGET_EVENTS_PER_SECOND and ratio >= TARGET_RATIO,
    }
