"""Taking hits in (ENG-3): verify, find the link, classify, and record in a group commit.

The API the public routes and `tidings bench tracking` use:

    intake = Intake(db, secret, rules, settings.tracking, clock, metrics)
    url = await intake.take(HitKind.CLICK, link_token, message_token,
                            method="GET", user_agent=agent, address=client_host)
    # url: where to redirect ('' for the pixel), or None: answer 404, nothing recorded
    await intake.close()   # writes what is buffered (the container does it on close)

`take` returns once the hit is committed with others in one multi-row INSERT (every
`tracking.commit_interval_ms`), or after about a second if the database is slow or down: the
reader is answered either way, and a hit that could not be written is counted in
`tidings_engagement_hits_dropped_total`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from tidings.config.tracking import TrackingSettings
from tidings.domain.clock import Clock
from tidings.domain.machine_rules import MachineRules, parse_address
from tidings.domain.tracking import HitKind, TrackingSigner
from tidings.engagement.classify import Classifier
from tidings.engagement.link_cache import LinkCache
from tidings.observability.metrics import Metrics
from tidings.storage.database import Database
from tidings.storage.engagement_hits import append_hits

log = structlog.get_logger("tidings.engagement")
WAIT_SECONDS = 1.0  # a reader waits at most this long for the commit of their hit
FLUSH_ROWS = 2000  # a buffer this full is written without waiting for the interval
MAX_PENDING = 100_000  # past this, new hits are dropped (counted): memory stays bounded
MAX_USER_AGENT = 512  # only the start of an agent is looked at
WRITERS = 4  # batches written at once


class GroupCommit:
    """Buffers intake rows and writes them as one INSERT per batch; `add` waits for it.

    A batch starts at most once per interval while writes are quick; under load up to
    `WRITERS` batches are written at once (PostgreSQL overlaps their commits; SQLite's one
    writer takes them in turn) and rows arriving meanwhile join the next batch."""

    def __init__(
        self, db: Database, interval_seconds: float, on_dropped: Callable[[int], None]
    ) -> None:
        self._db = db
        self._interval = interval_seconds
        self._on_dropped = on_dropped
        self._rows: list[dict[str, Any]] = []
        self._done: asyncio.Future[bool] | None = None
        self._wake = asyncio.Event()
        self._writers = asyncio.Semaphore(WRITERS)
        self._writing: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    async def add(self, row: dict[str, Any]) -> bool:
        """Buffer `row`; True once it is committed, False if it was not (or not within
        `WAIT_SECONDS`: one timer per batch answers all its readers)."""
        if len(self._rows) >= MAX_PENDING or self._closing:
            self._on_dropped(1)
            return False
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="engagement-group-commit")
        done = self._done
        if done is None:
            loop = asyncio.get_running_loop()
            done = self._done = loop.create_future()
            loop.call_later(WAIT_SECONDS, _settle, done, False)
        self._rows.append(row)
        self._wake.set()
        # Shielded: a reader who hangs up must not cancel the batch's other readers' wait.
        return await asyncio.shield(done)

    async def close(self) -> None:
        """Write what is buffered, then stop."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        started = -self._interval
        while True:
            await self._wake.wait()
            pause = started + self._interval - loop.time()
            if pause > 0 and not self._closing and len(self._rows) < FLUSH_ROWS:
                await asyncio.sleep(pause)  # let the interval's other hits join
            await self._writers.acquire()  # every writer busy: the batch keeps growing
            self._wake.clear()
            rows, done = self._rows, self._done
            self._rows, self._done = [], None
            started = loop.time()
            if rows and done is not None:
                task = asyncio.create_task(self._write(rows, done))
                self._writing.add(task)
                task.add_done_callback(self._writing.discard)
            else:
                self._writers.release()
            if self._closing and not self._rows:
                await asyncio.gather(*self._writing)
                return

    async def _write(self, rows: list[dict[str, Any]], done: asyncio.Future[bool]) -> None:
        written = True
        try:
            async with self._db.write() as conn:
                await append_hits(conn, rows)
        except Exception as exc:  # never the reader's problem: counted and logged
            log.warning("engagement.hits_dropped", hits=len(rows), error=type(exc).__name__)
            self._on_dropped(len(rows))
            written = False
        finally:
            self._writers.release()
        _settle(done, written)


def _settle(done: asyncio.Future[bool], written: bool) -> None:
    if not done.done():
        done.set_result(written)


class Intake:
    """The public endpoints' one entry (see the module)."""

    def __init__(
        self,
        db: Database,
        secret: Callable[[], str],
        rules: MachineRules,
        settings: TrackingSettings,
        clock: Clock,
        metrics: Metrics,
    ) -> None:
        self._secret = secret
        self._signer: tuple[str, TrackingSigner] | None = None
        self._clock = clock
        self._metrics = metrics
        self._links = LinkCache(db)
        self._classifier = Classifier(
            rules,
            machine_window_seconds=settings.machine_window_seconds,
            source_hits_per_minute=settings.source_hits_per_minute,
        )
        self._commit = GroupCommit(
            db, settings.commit_interval_ms / 1000, metrics.engagement_hits_dropped.inc
        )

    def signer(self) -> TrackingSigner:
        """Built once per site secret (loaded when the container starts)."""
        secret = self._secret()
        if self._signer is None or self._signer[0] != secret:
            self._signer = (secret, TrackingSigner(secret))
        return self._signer[1]

    async def take(
        self,
        kind: HitKind,
        link_token: str,
        message_token: str,
        *,
        method: str,
        user_agent: str,
        address: str | None,
    ) -> str | None:
        """Where to send the reader ('' for the pixel), or None when either token fails to
        verify or names no stored link (answer 404; nothing recorded)."""
        signer = self.signer()
        link_ref = signer.read_link(link_token)
        if link_ref is None:
            return None
        message = signer.read_message(link_ref.campaign_id, message_token)
        if message is None or (kind is HitKind.OPEN) != (link_ref.number == 0):
            return None
        link = await self._links.find(link_ref.campaign_id, link_ref.segment, link_ref.number)
        if link is None:
            return None
        now = self._clock()
        found = self._classifier.classify(
            kind=kind,
            method=method,
            user_agent=user_agent[:MAX_USER_AGENT],
            address=parse_address(address) if address else None,
            hidden=link.hidden,
            sent_at=message.sent_at,
            now=now,
        )
        if found is None:  # a flood far over its limit: answered, not recorded
            self._metrics.engagement_hits.labels(kind.value, "ignored").inc()
            return link.url
        self._metrics.engagement_hits.labels(kind.value, found.verdict.value).inc()
        await self._commit.add(
            {
                "received_at": now,
                "campaign_id": link_ref.campaign_id,
                "segment": link_ref.segment,
                "number": link_ref.number,
                "kind": kind.value,
                "message_key": message.message_key,
                "recipient_id": message.recipient_id,
                "sent_at": message.sent_at,
                "verdict": found.verdict.value,
                "reason": found.reason,
                "client_family": found.family,
            }
        )
        return link.url

    async def close(self) -> None:
        await self._commit.close()
