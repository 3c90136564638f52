"""The applier (ENG-3, ENG-5): folds the intake into firsts, counters, consented people's hits
and `subscriber.engaged`, in set-based batches, one transaction each.

Run by the workers' `apply_engagement` periodic task, and callable directly (`apply_all`, for
tests and `tidings bench tracking`). Unique counts move only when a (message, link, kind) gets
its first human hit (`engagement_firsts`), so replayed hits never move them. A click on link n
also counts in number 0 (the segment as a whole); an open is number 0 only. Hits of a deleted
campaign are dropped. Several appliers may run: each claims rows the others do not hold.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from tidings.config.tracking import TrackingSettings
from tidings.domain.clock import Clock
from tidings.outbound.webhooks import Webhooks
from tidings.storage import engagement_hits as hits
from tidings.storage.database import Database
from tidings.storage.engagement_hits import CounterKey, FirstKey, IntakeRow

log = structlog.get_logger("tidings.engagement")
SEGMENT_WIDE = 0


def burst_ids(
    clicks: Iterable[IntakeRow], window_seconds: float, links_needed: Callable[[int, str], int]
) -> set[int]:
    """The clicks that belong to a burst: one message's clicks on at least
    `links_needed(campaign, segment)` distinct links within `window_seconds`. Decided from the
    clicks' times alone, so the order they arrived or were applied in changes nothing."""
    by_message: dict[tuple[int, str, str], list[IntakeRow]] = defaultdict(list)
    for click in clicks:
        by_message[(click.campaign_id, click.segment, click.message_key)].append(click)
    found: set[int] = set()
    window = timedelta(seconds=window_seconds)
    for (campaign_id, segment, _), group in by_message.items():
        needed = links_needed(campaign_id, segment)
        if len({click.number for click in group}) < needed:
            continue
        group.sort(key=lambda click: (click.received_at, click.id))
        for start, first in enumerate(group):
            inside = [c for c in group[start:] if c.received_at - first.received_at <= window]
            if len({click.number for click in inside}) >= needed:
                found.update(click.id for click in inside)
    return found


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def _numbers(row: IntakeRow) -> tuple[int, ...]:
    """The counters a hit counts in: its link and the segment as a whole (clicks)."""
    if row.kind == "click" and row.number != SEGMENT_WIDE:
        return (row.number, SEGMENT_WIDE)
    return (SEGMENT_WIDE,)


def tally(
    rows: Sequence[IntakeRow],
) -> tuple[dict[FirstKey, datetime], dict[CounterKey, list[int]]]:
    """Candidate firsts (with the hour of their earliest hit) and each counter's totals."""
    firsts: dict[FirstKey, datetime] = {}
    counts: dict[CounterKey, list[int]] = defaultdict(lambda: [0, 0, 0])
    for row in rows:
        hour = _hour(row.received_at)
        human = row.verdict == "human"
        for number in _numbers(row):
            counts[(row.campaign_id, row.segment, number, row.kind, hour)][1 if human else 2] += 1
            if human:
                key = (row.campaign_id, row.segment, number, row.kind, row.message_key)
                if key not in firsts or hour < firsts[key]:
                    firsts[key] = hour
    return firsts, counts


class EngagementApplier:
    def __init__(
        self,
        db: Database,
        settings: TrackingSettings,
        clock: Clock,
        webhooks: Webhooks | None = None,
    ) -> None:
        """`webhooks` None: no `subscriber.engaged` events go out (the benchmark's applier)."""
        self._db = db
        self._settings = settings
        self._clock = clock
        self._webhooks = webhooks

    async def apply_once(self, *, settled: bool = True) -> int:
        """Apply one batch; how many intake rows it took. `settled`: only hits older than the
        burst window (so a burst's other clicks are in); False takes everything (tests, bench)."""
        now = self._clock()
        before = now - timedelta(seconds=self._settings.burst_window_seconds) if settled else now
        async with self._db.write() as conn:
            rows = await hits.claim_intake(conn, before, self._settings.apply_batch)
            if not rows:
                return 0
            live = await hits.existing_campaigns(conn, (row.campaign_id for row in rows))
            kept = [row for row in rows if row.campaign_id in live]
            await self._mark_bursts(conn, kept)
            firsts, counts = tally(kept)
            new = await hits.insert_firsts(conn, sorted(firsts))
            for key in new:
                counts[(*key[:4], firsts[key])][0] += 1
            await hits.add_to_counters(conn, counts)
            await self._people(conn, kept, now)
            await hits.delete_intake(conn, [row.id for row in rows])
        log.info("engagement.applied", hits=len(rows), dropped=len(rows) - len(kept))
        return len(rows)

    async def apply(self) -> int:
        """Apply settled hits until none is left (the periodic task); how many."""
        total = 0
        while applied := await self.apply_once():
            total += applied
            if applied < self._settings.apply_batch:
                break
        return total

    async def _mark_bursts(self, conn: Any, rows: list[IntakeRow]) -> None:
        keys = [row.message_key for row in rows if row.kind == "click" and row.verdict == "human"]
        if not keys:
            return
        clicks = await hits.clicks_of_messages(conn, keys)
        links = await hits.link_counts(conn, {(c.campaign_id, c.segment) for c in clicks})
        burst_links = self._settings.burst_links

        def needed(campaign_id: int, segment: str) -> int:
            # At least two distinct links: a message with one link cannot burst.
            return max(2, min(burst_links, links.get((campaign_id, segment), burst_links)))

        burst = burst_ids(clicks, self._settings.burst_window_seconds, needed)
        await hits.mark_machine(
            conn, [c.id for c in clicks if c.id in burst and c.verdict == "human"], "burst"
        )
        for row in rows:
            if row.id in burst and row.verdict == "human":
                row.verdict, row.reason = "machine", "burst"

    async def _people(self, conn: Any, rows: list[IntakeRow], now: datetime) -> None:
        """Consented people's own hits, and `subscriber.engaged` once per person and campaign."""
        named = [row for row in rows if row.recipient_id is not None]
        if not named:
            return
        people = await hits.consented_recipients(conn, (row.recipient_id for row in named))  # type: ignore[misc]
        person_hits = []
        engaged: list[tuple[int, int]] = []
        for row in named:
            found = people.get(row.recipient_id)  # type: ignore[arg-type]
            if found is None or found[0] != row.campaign_id:
                continue
            person_hits.append(
                {
                    "campaign_id": row.campaign_id,
                    "subscriber_id": found[1],
                    "segment": row.segment,
                    "number": row.number,
                    "kind": row.kind,
                    "verdict": row.verdict,
                    "reason": row.reason,
                    "client_family": row.client_family,
                    "at": row.received_at,
                }
            )
            if row.verdict == "human":
                engaged.append(found)
        await hits.add_person_hits(conn, person_hits)
        new = await hits.insert_notices(conn, engaged, now)
        if new and self._webhooks is not None:
            emails = await hits.subscriber_emails(conn, (s for _, s in new))
            events = [
                (
                    "subscriber.engaged",
                    {"subscriber_id": s, "email": emails.get(s), "campaign_id": c},
                )
                for c, s in new
            ]
            await self._webhooks.publish_many(conn, events)


async def apply_all(
    db: Database, *, settings: TrackingSettings | None = None, clock: Clock | None = None
) -> int:
    """Apply every hit in the intake now, settled or not, with no webhooks (the benchmark's
    and tests' way in); how many hits were applied."""
    applier = EngagementApplier(db, settings or TrackingSettings(), clock or _utcnow)
    total = 0
    while applied := await applier.apply_once(settled=False):
        total += applied
    return total
