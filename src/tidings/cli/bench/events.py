"""`tidings bench events`: how fast one API process takes a campaign's aftermath (PRV-6) —
signed Mailgun `delivered` events posted over loopback to `tidings api`, each verified,
recorded once, tied to its recipient row and folded into the reader's outcome — beside a bare
multi-row INSERT of the same rows into the same table in the same run.

A scratch database of the configured kind gets `events` readers and a campaign already sent
to them all; `tidings api` runs in its own process on a free port; `connections` clients
post one event per request, as Mailgun does. The target (issue 22): 2,000 events/s and at
least 0.25 of the bare insert, on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import time
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from tidings.cli.bench.send import _wait_for_port
from tidings.cli.context import free_port
from tidings.delivery.mailgun_events import event_data, signed_body
from tidings.domain.email_headers import message_id
from tidings.storage import feedback, migrate
from tidings.storage.bench import seeding
from tidings.storage.bench.scratch import scratch_database
from tidings.storage.database import create_database
from tidings.storage.tables import inbound_events, newsletters

TARGET_EVENTS_PER_SECOND = 2000
TARGET_RATIO = 0.25
DOMAIN = "mg.bench.example.org"
BARE_CHUNK = 1000
PATH = "/api/events/mailgun"
# Events posted before the clock starts, to readers of their own: the first requests build
# what a running server has built long before (the OpenAPI route table, prepared statements).
WARM_UP = 200


async def _prepare(url: str, events: int) -> int:
    """Migrate, seed `events` readers and a campaign sent to them; the campaign id."""
    db = create_database(url)
    try:
        await migrate.upgrade(db)
        now = datetime.now(UTC)
        async with db.write() as conn:
            newsletter_id = (
                await conn.execute(
                    newsletters.insert()
                    .values(
                        slug="bench",
                        name="Bench",
                        sender_name="Bench",
                        sender_address="bench@example.org",
                        created_at=now,
                        updated_at=now,
                    )
                    .returning(newsletters.c.id)
                )
            ).scalar_one()
            await seeding.seed_audience(conn, newsletter_id=newsletter_id, count=events, now=now)
            return await seeding.seed_sent_campaign(
                conn, newsletter_id=newsletter_id, sending_domain=DOMAIN, now=now
            )
    finally:
        await db.dispose()


def _bodies(key: str, campaign_id: int, events: int) -> list[bytes]:
    """One signed `delivered` event for each of readers 1..`events`."""
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


class _Poster:
    """One keep-alive HTTP/1.1 connection posting bodies one after another, as a Mailgun
    sender does. Written on asyncio streams rather than httpx: profiled, httpx's pool spent
    more CPU choosing a connection per request (O(connections)) than the API spent on it, and
    on a shared machine the client's CPU is taken from the server it measures."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def connect(cls, port: int) -> _Poster:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def post(self, body: bytes) -> str:
        """POST one event; the outcome the API answered (or the status code, if none)."""
        head = (
            f"POST {PATH} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        )
        self._writer.write(head.encode() + body)
        status_and_headers = await self._reader.readuntil(b"\r\n\r\n")
        lines = status_and_headers.decode("latin-1").split("\r\n")
        status = lines[0].split(" ", 2)[1]
        length = next(
            int(line.split(":", 1)[1])
            for line in lines[1:]
            if line.lower().startswith("content-length:")
        )
        answer = json.loads(await self._reader.readexactly(length)) if length else {}
        outcome = answer.get("outcome") if isinstance(answer, dict) else None
        return str(outcome or status)

    async def close(self) -> None:
        self._writer.close()
        await self._writer.wait_closed()


async def _post_all(
    port: int, bodies: list[bytes], connections: int
) -> tuple[float, dict[str, int]]:
    """Post every body over `connections` keep-alive connections; seconds taken, outcomes."""
    queue = list(reversed(bodies))
    outcomes: dict[str, int] = {}
    posters = [await _Poster.connect(port) for _ in range(min(connections, len(bodies)))]

    async def post_until_done(poster: _Poster) -> None:
        while queue:
            outcome = await poster.post(queue.pop())
            outcomes[outcome] = outcomes.get(outcome, 0) + 1

    try:
        started = time.perf_counter()
        await asyncio.gather(*(post_until_done(poster) for poster in posters))
        return time.perf_counter() - started, outcomes
    finally:
        for poster in posters:
            await poster.close()


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
            await feedback.bare_insert(conn, rows, chunk=BARE_CHUNK)
        return time.perf_counter() - started
    finally:
        await db.dispose()


async def _count_applied(url: str) -> int:
    db = create_database(url)
    try:
        async with db.read() as conn:
            query = select(inbound_events.c.id).where(
                inbound_events.c.source == "mailgun", inbound_events.c.status == "applied"
            )
            return len((await conn.execute(query)).all())
    finally:
        await db.dispose()


async def bench_events(configured_url: str, *, events: int, connections: int) -> dict[str, Any]:
    key = secrets.token_hex(16)
    async with scratch_database(configured_url) as url:
        warm_up = min(WARM_UP, events)
        campaign_id = await _prepare(url, warm_up + events)
        bodies = _bodies(key, campaign_id, warm_up + events)
        port = free_port()
        environment = {
            **os.environ,
            "TIDINGS_DATABASE_URL": url,
            "TIDINGS_MAILGUN_WEBHOOK_SIGNING_KEY": key,
            "TIDINGS_LOG_LEVEL": "warning",
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tidings", "api", "--port", str(port),
            env=environment,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            await _wait_for_port(port)
            _, warm_up_outcomes = await _post_all(port, bodies[:warm_up], connections)
            elapsed, outcomes = await _post_all(port, bodies[warm_up:], connections)
        finally:
            process.terminate()
            await process.wait()
        applied = await _count_applied(url) - warm_up_outcomes.get("applied", 0)
        bare_seconds = await _bare(url, events)
    ours = events / elapsed
    bare = events / bare_seconds
    ratio = round(ours / bare, 3)
    return {
        "benchmark": "events",
        "database": "postgresql" if configured_url.startswith("postgresql") else "sqlite",
        "events": events,
        "connections": connections,
        "warm_up_events": warm_up,
        "outcomes": outcomes,
        "applied_rows": applied,
        "seconds": round(elapsed, 3),
        "events_per_second": round(ours, 1),
        "bare_insert_rows_per_second": round(bare, 1),
        "ratio_to_bare_insert": ratio,
        "target_events_per_second": TARGET_EVENTS_PER_SECOND,
        "target_ratio": TARGET_RATIO,
        "within_target": ours >= TARGET_EVENTS_PER_SECOND and ratio >= TARGET_RATIO,
    }
