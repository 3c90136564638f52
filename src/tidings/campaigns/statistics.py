"""A campaign's results (SND-27): sent, delivered, hard and soft bounced, complained and
unsubscribed through its links, with rates, in total and per segment, counted from the
recipient rows the provider events filled in (PRV-6). Rates are shares of `sent`.

A campaign of up to `bulk_email.stored_statistics_above` recipients is counted each time it is
read (a few milliseconds). A larger one is counted by the workers (`recount`, a periodic task)
and its page reads the stored count, which says when it was taken: counting a million rows
takes a tenth of a second, too long for every view of a page. While a campaign is sending or
recent it is counted again every `statistics_interval_seconds`, or after a hundred times its
last count's time if that is longer (so counting takes at most 1% of the database's time per
campaign); older campaigns once a day, for the late complaint."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.errors import NotFound
from tidings.storage import campaigns as campaign_queries
from tidings.storage.database import Database
from tidings.storage.sending import outcome_counts, recipient_outcomes
from tidings.storage.sending.outcome_counts import Recount, StoredCounts

COUNTS = recipient_outcomes.OUTCOME_COUNTS
RECENT = timedelta(days=14)  # a campaign finished this long ago is settled
SETTLED_INTERVAL = timedelta(days=1)
COST_SHARE = 100  # wait a hundred times a count's time before the next: 1% of the database
RECOUNT_BUDGET_SECONDS = 5.0  # one periodic run counts campaigns for at most this long


@dataclass(frozen=True, slots=True)
class Counts:
    sent: int = 0
    delivered: int = 0
    hard_bounced: int = 0
    soft_bounced: int = 0
    complained: int = 0
    unsubscribed: int = 0

    def rates(self) -> dict[str, float]:
        """Each outcome as a share of `sent` (0 when nothing was sent), to 4 places."""
        return {
            name: round(getattr(self, name) / self.sent, 4) if self.sent else 0.0
            for name in COUNTS[1:]
        }

    def plus(self, other: Counts) -> Counts:
        return Counts(*(getattr(self, name) + getattr(other, name) for name in COUNTS))


@dataclass(frozen=True, slots=True)
class CampaignStatistics:
    campaign_id: int
    total: Counts
    segments: dict[str, Counts]
    # (hour, kind, events) of the applied events, oldest first.
    timeline: list[tuple[datetime, str, int]] = field(default_factory=list)
    # When the workers counted it (a large campaign), or None: counted as it was read.
    counted_at: datetime | None = None


def per_hour(
    timeline: list[tuple[datetime, str, int]], kinds: frozenset[str]
) -> tuple[list[str], list[int]]:
    """Events of `kinds` per hour, from the first event's hour to the last's (labels
    `MM-DD HH:00` UTC), for the campaign page's chart."""
    hours = [at.replace(minute=0, second=0, microsecond=0) for at, _, _ in timeline]
    if not hours:
        return [], []
    first, last = min(hours), max(hours)
    span = int((last - first).total_seconds() // 3600) + 1
    counts = [0] * span
    for hour, (_, kind, events) in zip(hours, timeline, strict=True):
        if kind in kinds:
            counts[int((hour - first).total_seconds() // 3600)] += events
    labels = [f"{first + timedelta(hours=n):%m-%d %H:00}" for n in range(span)]
    return labels, counts


def recount_due(recount: Recount, now: datetime, interval: timedelta) -> bool:
    """Whether the workers should count this large campaign again now: never counted; sending
    or recent and counted longer ago than the interval, or than a hundred times its last
    count's time; settled and counted over a day ago."""
    if recount.counted_at is None:
        return True
    age = now - recount.counted_at
    if recount.finished_at is not None and now - recount.finished_at > RECENT:
        return age >= SETTLED_INTERVAL
    return age >= max(interval, timedelta(milliseconds=recount.took_ms * COST_SHARE))


def _statistics(campaign_id: int, stored: StoredCounts, *, live: bool) -> CampaignStatistics:
    segments = {name: Counts(**values) for name, values in stored.segments.items()}
    total = Counts()
    for counts in segments.values():
        total = total.plus(counts)
    counted_at = None if live else stored.counted_at
    return CampaignStatistics(campaign_id, total, segments, stored.hourly, counted_at)


class StatisticsReader:
    def __init__(
        self,
        db: Database,
        now: Callable[[], datetime],
        *,
        stored_above: int,
        interval: timedelta,
    ) -> None:
        self._db = db
        self._now = now
        self._stored_above = stored_above
        self._interval = interval

    async def statistics(self, campaign_id: int, *, timeline: bool = False) -> CampaignStatistics:
        async with self._db.read() as conn:
            if await campaign_queries.get(conn, campaign_id) is None:
                raise NotFound(f"no campaign with id {campaign_id}")
            size = (await outcome_counts.sizes(conn, [campaign_id])).get(campaign_id, 0)
            if size <= self._stored_above:
                counted = await self._count(conn, campaign_id, timeline=timeline)
                return _statistics(campaign_id, counted, live=True)
            found = (await outcome_counts.stored(conn, [campaign_id])).get(campaign_id)
        if found is None:  # not counted yet: once, here; the workers keep it from now on
            found = await self.count_and_store(campaign_id)
        return _statistics(campaign_id, found, live=False)

    async def summaries(self, campaign_ids: list[int]) -> dict[int, dict[str, int]]:
        """Sent, delivered, bounced and complained of each campaign (the campaigns list): the
        stored counts of large campaigns, the others counted."""
        async with self._db.read() as conn:
            sizes = await outcome_counts.sizes(conn, campaign_ids)
            large = [cid for cid in campaign_ids if sizes.get(cid, 0) > self._stored_above]
            stored = await outcome_counts.stored(conn, large)
            counted = await recipient_outcomes.summaries(
                conn, [cid for cid in campaign_ids if cid not in stored]
            )
        for campaign_id, found in stored.items():
            total = _statistics(campaign_id, found, live=False).total
            counted[campaign_id] = {
                "sent": total.sent,
                "delivered": total.delivered,
                "bounced": total.hard_bounced + total.soft_bounced,
                "complained": total.complained,
            }
        return counted

    async def count_and_store(self, campaign_id: int) -> StoredCounts:
        """Count a campaign from its rows (a read) and keep the count (a short write)."""
        async with self._db.read() as conn:
            counted = await self._count(conn, campaign_id, timeline=True)
        async with self._db.write() as conn:
            await outcome_counts.store(conn, campaign_id, counted)
        return counted

    async def recount(self) -> int:
        """The workers' periodic task: count again the large campaigns that are due, longest
        uncounted first, for at most a few seconds a run; returns how many were counted."""
        now = self._now()
        async with self._db.read() as conn:
            candidates = await outcome_counts.recounts(
                conn, above=self._stored_above, counted_before=now - self._interval
            )
        started, counted = time.monotonic(), 0
        for candidate in candidates:
            if time.monotonic() - started > RECOUNT_BUDGET_SECONDS:
                break
            if recount_due(candidate, now, self._interval):
                await self.count_and_store(candidate.campaign_id)
                counted += 1
        return counted

    async def _count(
        self, conn: AsyncConnection, campaign_id: int, *, timeline: bool
    ) -> StoredCounts:
        started = time.perf_counter()
        at = self._now()
        segments = await recipient_outcomes.campaign_counts(conn, campaign_id)
        hourly = await recipient_outcomes.campaign_hourly(conn, campaign_id) if timeline else []
        took_ms = int((time.perf_counter() - started) * 1000)
        return StoredCounts(segments, hourly, at, took_ms)
