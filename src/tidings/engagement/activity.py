"""A person's activity (ENG-6): their opens and clicks (per_person, consented only) in one
timeline with their bounces, complaints and unsubscribes; and the retention purge that deletes
their hits once `tracking.retention_days` have passed."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog

from tidings.domain.clock import Clock
from tidings.storage import engagement_people as queries
from tidings.storage.database import Database

log = structlog.get_logger("tidings.engagement")
PURGE_BATCH = 10_000  # rows per transaction, so a purge never holds a long write


@dataclass(frozen=True, slots=True)
class ActivityEntry:
    """One line of the timeline. `verdict` and `reason` for a hit (a machine's hits are shown,
    marked, so an operator sees what a scanner did); `detail` for a bounce."""

    at: datetime
    kind: str  # open | click | bounce | complaint | unsubscribe
    campaign_id: int
    campaign: str
    url: str | None = None
    verdict: str | None = None
    reason: str | None = None
    detail: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "at": self.at.isoformat()}


def _from_hit(hit: queries.PersonHit) -> ActivityEntry:
    return ActivityEntry(
        hit.at, hit.kind, hit.campaign_id, hit.subject, hit.url, hit.verdict, hit.reason
    )


def _from_outcome(outcome: queries.RecipientOutcome) -> ActivityEntry:
    detail = " ".join(part for part in (outcome.bounce_kind, outcome.bounce_code) if part)
    return ActivityEntry(
        outcome.at, outcome.kind, outcome.campaign_id, outcome.subject, detail=detail or None
    )


class PersonActivity:
    """Reads a person's timeline; purges hits past the retention."""

    def __init__(self, db: Database, now: Clock, *, retention: timedelta) -> None:
        self._db = db
        self._now = now
        self._retention = retention

    async def of(self, subscriber_id: int, *, limit: int = 200) -> list[ActivityEntry]:
        """The newest `limit` entries, newest first. An unknown id has no activity."""
        async with self._db.read() as conn:
            hits = await queries.hits_of(conn, subscriber_id, limit=limit)
            outcomes = await queries.outcomes_of(conn, subscriber_id, limit=limit)
        entries = [*map(_from_hit, hits), *map(_from_outcome, outcomes)]
        entries.sort(key=lambda entry: entry.at, reverse=True)
        return entries[:limit]

    async def purge(self) -> int:
        """Delete person hits older than the retention, a batch per transaction (a workers'
        maintenance task). The counters already hold them, so no figure changes."""
        before = self._now() - self._retention
        purged = 0
        while True:
            async with self._db.write() as conn:
                deleted = await queries.purge_before(conn, before, batch=PURGE_BATCH)
            purged += deleted
            if deleted < PURGE_BATCH:
                break
        if purged:
            log.info("engagement.person_hits_purged", hits=purged)
        return purged
