"""Subscriber webhook events, written to the outbox in the caller's transaction (DLV-5)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.audience.context import AudienceContext
from tidings.storage.newsletters import NewsletterRow
from tidings.storage.subscribers import SubscriberRow


def subscriber_data(
    subscriber: SubscriberRow, newsletter: NewsletterRow | None = None, **extra: Any
) -> dict[str, Any]:
    """The `data` of a subscriber event. Webhook payloads go to the publisher's own systems
    and may carry the address; logs never."""
    data: dict[str, Any] = {
        "subscriber_id": subscriber.id,
        "email": subscriber.email,
        "name": subscriber.name,
        "tier": subscriber.tier,
        **extra,
    }
    if newsletter is not None:
        data["newsletter"] = newsletter.slug
    return data


async def subscriber_event(
    context: AudienceContext,
    conn: AsyncConnection,
    event_type: str,
    subscriber: SubscriberRow,
    newsletter: NewsletterRow | None = None,
    **extra: Any,
) -> None:
    await context.webhooks.publish(
        conn, event_type, subscriber_data(subscriber, newsletter, **extra)
    )
