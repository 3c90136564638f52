"""A campaign's results (SND-27): sent, delivered, hard and soft bounced, complained and
unsubscribed through its links, with rates, in total and per segment, counted from the
recipient rows the provider events filled in (PRV-6). Rates are shares of `sent`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from tidings.campaigns.context import SendingContext
from tidings.domain.errors import NotFound
from tidings.storage import campaigns as campaign_queries
from tidings.storage import recipient_outcomes

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
