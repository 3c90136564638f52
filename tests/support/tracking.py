"""A sent campaign with stored tracked links, and hits for it (issue 36's intake tests)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update

from tidings.bench.seeding import seed_audience, seed_newsletter, seed_sent_campaign, set_tracking
from tidings.domain.tracking import TrackingSigner
from tidings.storage.campaign_links import StoredLink, store_links
from tidings.storage.database import Database
from tidings.storage.engagement_hits import append_hits
from tidings.storage.tables import (
    campaign_recipients,
    engagement_counters,
    engagement_intake,
    subscribers,
)

SEGMENT = "free"
LINKS = [
    StoredLink(0, ""),
    StoredLink(1, "https://example.org/one"),
    StoredLink(2, "https://example.org/two?a=1&b=é"),
    StoredLink(3, "https://example.org/three"),
    StoredLink(4, "https://example.org/trap", hidden=True),
]


@dataclass
class Sent:
    campaign_id: int
    newsletter_id: int
    recipients: list[int]  # recipient row ids, in subscriber order
    subscribers: list[int]


async def sent_campaign(
    db: Database, *, readers: int, mode: str, now: datetime, slug: str = "tracked"
) -> Sent:
    """A newsletter tracking in `mode`, `readers` confirmed subscribers, a campaign sent to
    them all, and its segment's links stored (0 the pixel, 4 hidden)."""
    async with db.write() as conn:
        newsletter_id = await seed_newsletter(conn, slug=slug, now=now)
        await set_tracking(conn, newsletter_id, mode)
        await seed_audience(conn, newsletter_id=newsletter_id, count=readers, now=now)
        campaign_id = await seed_sent_campaign(
            conn, newsletter_id=newsletter_id, sending_domain="news.example.org", now=now
        )
        await store_links(conn, campaign_id, SEGMENT, LINKS, now)
        rows = await conn.execute(
            select(campaign_recipients.c.id, campaign_recipients.c.subscriber_id)
            .where(campaign_recipients.c.campaign_id == campaign_id)
            .order_by(campaign_recipients.c.subscriber_id)
        )
        pairs = [(row.id, row.subscriber_id) for row in rows]
    return Sent(campaign_id, newsletter_id, [r for r, _ in pairs], [s for _, s in pairs])


async def give_consent(db: Database, subscriber_id: int, now: datetime) -> None:
    async with db.write() as conn:
        await conn.execute(
            update(subscribers)
            .where(subscribers.c.id == subscriber_id)
            .values(tracking_consent_at=now, tracking_consent_source="preferences")
        )


def click_path(signer: TrackingSigner, campaign_id: int, number: int, message: str) -> str:
    prefix = "/o/" if number == 0 else "/c/"
    return f"{prefix}{signer.link_token(campaign_id, SEGMENT, number)}/{message}"


def intake_row(
    campaign_id: int,
    number: int,
    key: str,
    at: datetime,
    *,
    verdict: str = "human",
    recipient_id: int | None = None,
) -> dict[str, Any]:
    """An intake row as the endpoints write it."""
    return {
        "received_at": at,
        "campaign_id": campaign_id,
        "segment": SEGMENT,
        "number": number,
        "kind": "open" if number == 0 else "click",
        "message_key": key,
        "recipient_id": recipient_id,
        "sent_at": at - timedelta(hours=1),
        "verdict": verdict,
        "reason": "browser" if verdict == "human" else "scanner",
        "client_family": "browser",
    }


async def add_intake(db: Database, rows: list[dict[str, Any]]) -> None:
    async with db.write() as conn:
        await append_hits(conn, rows)


async def intake_rows(db: Database) -> list[Any]:
    async with db.read() as conn:
        query = select(engagement_intake).order_by(engagement_intake.c.id)
        return list(await conn.execute(query))


async def counters(db: Database, campaign_id: int) -> dict[tuple[int, str], tuple[int, int, int]]:
    """(number, kind) -> (human_unique, human_total, machine_total), summed over hours."""
    async with db.read() as conn:
        rows = await conn.execute(
            select(engagement_counters).where(engagement_counters.c.campaign_id == campaign_id)
        )
        summed: dict[tuple[int, str], tuple[int, int, int]] = {}
        for row in rows:
            was = summed.get((row.number, row.kind), (0, 0, 0))
            summed[(row.number, row.kind)] = (
                was[0] + row.human_unique,
                was[1] + row.human_total,
                was[2] + row.machine_total,
            )
        return summed
