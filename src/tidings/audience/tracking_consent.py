"""Recording a subscriber's consent to per-person tracking (ENG-1), in the caller's
transaction: given (when, how) or withdrawn (both columns cleared). What to write is decided by
`tidings.domain.tracking_consent`; this module carries it out."""

from __future__ import annotations

from datetime import datetime

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.tracking_consent import ConsentSource, TrackingConsent, change
from tidings.storage import engagement_people
from tidings.storage import subscribers as subscriber_queries
from tidings.storage import subscriptions as subscription_queries
from tidings.storage.subscribers import SubscriberRow
from tidings.storage.subscriptions import SubscriptionRow

log = structlog.get_logger("tidings.audience")


def consent_of(subscriber: SubscriberRow) -> TrackingConsent:
    return TrackingConsent(subscriber.tracking_consent_at, subscriber.tracking_consent_source)


async def record_tracking_consent(
    conn: AsyncConnection,
    subscriber: SubscriberRow,
    wanted: bool,
    *,
    source: ConsentSource,
    now: datetime,
) -> SubscriberRow:
    """Give (`wanted`) or withdraw the consent; the row unchanged when it already says so."""
    written = change(consent_of(subscriber), wanted, source=source, now=now)
    if written is None:
        return subscriber
    row = await subscriber_queries.update_subscriber(
        conn, subscriber.id, tracking_consent_at=written.at, tracking_consent_source=written.source
    )
    if not wanted:
        # What was recorded under the consent goes with it; the campaign counts keep the
        # hits, which never named anyone.
        await engagement_people.forget(conn, [subscriber.id])
    # The change itself is the record (the row keeps when and how); the log says only that.
    log.info("subscriber.tracking_consent", subscriber_id=subscriber.id, given=wanted)
    return row or subscriber


async def ask_at_confirmation(
    conn: AsyncConnection, subscription: SubscriptionRow, *, now: datetime | None
) -> None:
    """The signup form's box was ticked (`now`) or left unticked (None) on the latest request
    for a subscription the person has yet to confirm: what their emailed link will agree to."""
    await subscription_queries.update_subscription(
        conn, subscription.id, tracking_consent_asked_at=now
    )


async def record_on_confirmation(
    conn: AsyncConnection, subscription: SubscriptionRow, *, now: datetime
) -> None:
    """The person confirmed `subscription` by their own link: a tracking box ticked on the
    signup that asked for it becomes their consent (source `signup`), once."""
    if subscription.tracking_consent_asked_at is None:
        return
    subscriber = await subscriber_queries.get(conn, subscription.subscriber_id)
    if subscriber is not None:
        await record_tracking_consent(conn, subscriber, True, source=ConsentSource.SIGNUP, now=now)
    await subscription_queries.update_subscription(
        conn, subscription.id, tracking_consent_asked_at=None, updated_at=now
    )
