"""A campaign's results (SND-27): sent, delivered, hard and soft bounced, complained and
unsubscribed through its links, with rates, in total and per segment, counted from the
recipient rows the provider events filled in (PRV-6). Rates are shares of `sent`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tidings.campaigns.context import SendingContext
from tidings.domain.errors import NotFound
from tidings.storage import campaigns as campaign_queries
from tidings.storage.sending import recipient_outcomes

COUNTS = ("sent", "delivered", "hard_bounced", "soft_bounced", "complained", "unsubscribed")


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
    timeline: list[tuple[datetime, str]] = field(default_factory=list)


def per_hour(
    timeline: list[tuple[datetime, str]], kinds: frozenset[str]
) -> tuple[list[str], list[int]]:
    """Events of `kinds` per hour, from the first event's hour to the last's (labels
    `MM-DD HH:00` UTC), for the campaign page's chart."""
    hours = [at.replace(minute=0, second=0, microsecond=0) for at, _ in timeline]
    if not hours:
        return [], []
    first, last = min(hours), max(hours)
    span = int((last - first).total_seconds() // 3600) + 1
    counts = [0] * span
    for hour, (_, kind) in zip(hours, timeline, strict=True):
        if kind in kinds:
            counts[int((hour - first).total_seconds() // 3600)] += 1
    labels = [f"{first + timedelta(hours=n):%m-%d %H:00}" for n in range(span)]
    return labels, counts


class StatisticsReader:
    def __init__(self, context: SendingContext) -> None:
        self._ctx = context

    async def statistics(self, campaign_id: int, *, timeline: bool = False) -> CampaignStatistics:
        async with self._ctx.db.read() as conn:
            if await campaign_queries.get(conn, campaign_id) is None:
                raise NotFound(f"no campaign with id {campaign_id}")
            counted = await recipient_outcomes.campaign_counts(conn, campaign_id)
            events = (
                await recipient_outcomes.campaign_timeline(conn, campaign_id) if timeline else []
            )
        segments = {name: Counts(**values) for name, values in counted.items()}
        total = Counts()
        for counts in segments.values():
            total = total.plus(counts)
        return CampaignStatistics(campaign_id, total, segments, events)

    async def summaries(self, campaign_ids: list[int]) -> dict[int, dict[str, int]]:
        """Sent, delivered, bounced and complained of each campaign (the campaigns list)."""
        async with self._ctx.db.read() as conn:
            return await recipient_outcomes.summaries(conn, campaign_ids)
