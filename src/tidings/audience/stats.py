"""The audience at a glance, for the admin UI: subscriptions per newsletter and state, day-by-day
confirmations and unsubscribes over a recent period, and one person's campaign deliveries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from tidings.audience.context import AudienceContext
from tidings.storage import audience_stats as queries
from tidings.storage import newsletters as newsletter_queries
from tidings.storage import subscriber_deliveries as delivery_queries
from tidings.storage.subscriber_deliveries import DeliveryRow


@dataclass(frozen=True, slots=True)
class NewsletterCounts:
    slug: str
    name: str
    by_state: dict[str, int]  # pending, confirmed, unsubscribed: absent states count 0


@dataclass(frozen=True, slots=True)
class DayChange:
    day: date
    confirmed: int
    unsubscribed: int


class AudienceStats:
    def __init__(self, context: AudienceContext) -> None:
        self._ctx = context

    async def per_newsletter(self) -> list[NewsletterCounts]:
        async with self._ctx.db.read() as conn:
            newsletters = await newsletter_queries.list_newsletters(conn)
            counts = await queries.subscriptions_by_state(conn)
        by_id: dict[int, dict[str, int]] = {n.id: {} for n in newsletters}
        for newsletter_id, state, count in counts:
            by_id.setdefault(newsletter_id, {})[state] = count
        return [NewsletterCounts(n.slug, n.name, by_id[n.id]) for n in newsletters]

    async def growth(self, days: int = 30) -> list[DayChange]:
        """The last `days` UTC days, today included, oldest first."""
        today = self._ctx.now().astimezone(UTC).date()
        first = today - timedelta(days=days - 1)
        starts = [
            datetime(first.year, first.month, first.day, tzinfo=UTC) + timedelta(days=offset)
            for offset in range(days + 1)
        ]
        async with self._ctx.db.read() as conn:
            changes = await queries.daily_changes(conn, starts)
        return [
            DayChange(first + timedelta(days=offset), confirmed, unsubscribed)
            for offset, (confirmed, unsubscribed) in enumerate(changes)
        ]

    async def deliveries_of(self, subscriber_id: int, *, limit: int = 100) -> list[DeliveryRow]:
        """The campaigns that reached (or skipped) one person, newest first (the person page)."""
        async with self._ctx.db.read() as conn:
            return await delivery_queries.deliveries_of(conn, subscriber_id, limit=limit)
