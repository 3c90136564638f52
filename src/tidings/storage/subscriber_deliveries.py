"""Named query for one person's campaign deliveries: which campaigns, in which state."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.tables import campaign_recipients, campaigns


@dataclass(frozen=True, slots=True)
class DeliveryRow:
    campaign_id: int
    subject: str
    state: str
    reason: str | None
    updated_at: datetime
    delivered_at: datetime | None = None
    bounce_kind: str | None = None
    bounce_code: str | None = None
    complained_at: datetime | None = None

    @property
    def outcome(self) -> str:
        """What the provider or the subscriber reported (PRV-6), strongest first."""
        if self.complained_at is not None:
            return "complained"
        if self.bounce_kind is not None:
            return f"{self.bounce_kind} bounce" + (
                f" ({self.bounce_code})" if self.bounce_code else ""
            )
        return "delivered" if self.delivered_at is not None else ""


async def deliveries_of(
    conn: AsyncConnection, subscriber_id: int, *, limit: int
) -> list[DeliveryRow]:
    """The subscriber's recipient rows, newest campaign first."""
    query = (
        select(
            campaign_recipients.c.campaign_id,
            campaigns.c.subject,
            campaign_recipients.c.state,
            campaign_recipients.c.reason,
            campaign_recipients.c.updated_at,
            campaign_recipients.c.delivered_at,
            campaign_recipients.c.bounce_kind,
            campaign_recipients.c.bounce_code,
            campaign_recipients.c.complained_at,
        )
        .join(campaigns, campaigns.c.id == campaign_recipients.c.campaign_id)
        .where(campaign_recipients.c.subscriber_id == subscriber_id)
        .order_by(campaign_recipients.c.campaign_id.desc())
        .limit(limit)
    )
    return [DeliveryRow(**row._mapping) for row in await conn.execute(query)]
