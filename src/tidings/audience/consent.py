"""Writing consent decisions to one subscription, in the caller's transaction (PRI-6): the row,
the `subscriber.confirmed`/`subscriber.unsubscribed` event, and the confirmation email. What
to write is decided by `tidings.domain.consent`; this module only carries it out."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.audience.context import AudienceContext
from tidings.audience.subscriber_events import subscriber_event
from tidings.audience.subscriber_mail import queue_confirmation_email, queue_welcome_email
from tidings.domain.audience import Source
from tidings.domain.consent import (
    Subscribe,
    SubscriptionState,
    Transition,
    decide,
    subscription_state,
)
from tidings.domain.errors import NotFound
from tidings.storage import confirmations
from tidings.storage import newsletters as newsletter_queries
from tidings.storage import subscribers as subscriber_queries
from tidings.storage import subscriptions as subscription_queries
from tidings.storage.newsletters import NewsletterRow
from tidings.storage.subscribers import SubscriberRow
from tidings.storage.subscriptions import SubscriptionRow

log = structlog.get_logger("tidings.audience")
Owners = tuple[SubscriberRow, NewsletterRow]


def state_of(subscription: SubscriptionRow) -> SubscriptionState:
    return subscription_state(subscription.confirmed_at, subscription.unsubscribed_at)


class ConsentRecorder:
    def __init__(self, context: AudienceContext) -> None:
        self._ctx = context

    async def subscription(
        self,
        conn: AsyncConnection,
        subscriber_id: int,
        newsletter_id: int,
        *,
        source: Source,
        now: datetime,
    ) -> tuple[SubscriptionRow, SubscriptionState | None]:
        """The subscription, created pending if absent, and its state before (None: new)."""
        subscription, created = await subscription_queries.insert_if_absent(
            conn,
            subscriber_id=subscriber_id,
            newsletter_id=newsletter_id,
            source=source.value,
            created_at=now,
            updated_at=now,
        )
        return subscription, None if created else state_of(subscription)

    async def request(
        self,
        conn: AsyncConnection,
        subscriber: SubscriberRow,
        newsletter: NewsletterRow,
        *,
        source: Source,
        now: datetime,
        double_opt_in: bool | None = None,
    ) -> SubscriptionRow:
        """Someone asked to subscribe: create, revive or leave alone the subscription, and
        queue a confirmation email if one is needed (AUD-5), or the welcome email when a
        single opt-in newsletter is confirmed by the asking. `double_opt_in=True` asks for
        the confirmation whatever the newsletter's setting (an admin asked, not the person)."""
        subscription, before = await self.subscription(
            conn, subscriber.id, newsletter.id, source=source, now=now
        )
        if double_opt_in is None:
            double_opt_in = newsletter.double_opt_in
        decision = decide(before, Subscribe(source, double_opt_in))
        assert isinstance(decision, Transition)  # subscribing is never refused
        written = await self.record(
            conn, subscription, decision, now=now, owners=(subscriber, newsletter)
        )
        if decision.confirms:
            await queue_welcome_email(self._ctx, conn, written, newsletter)
        return written

    async def record(
        self,
        conn: AsyncConnection,
        subscription: SubscriptionRow,
        transition: Transition,
        *,
        now: datetime,
        owners: Owners | None = None,
        **event_data: Any,
    ) -> SubscriptionRow:
        """Write `transition`. The statements re-check its starting state, so of two
        concurrent requests only one confirms (or unsubscribes) and publishes the event."""
        if transition.revives:
            subscription = await subscription_queries.update_subscription(
                conn, subscription.id, unsubscribed_at=None, confirmed_at=None, updated_at=now
            )
            # Links from before the unsubscribe belong to an earlier request: a revive asks
            # afresh, so only the link it sends can confirm it.
            await confirmations.forget(conn, subscription.id)
            log.info("subscription.revived", subscription_id=subscription.id)
        if transition.confirms:
            assert transition.evidence is not None
            written = await subscription_queries.mark_confirmed(
                conn, subscription.id, evidence=transition.evidence, now=now
            )
            event = "subscriber.confirmed"
        elif transition.unsubscribes:
            written = await subscription_queries.mark_unsubscribed(conn, subscription.id, now=now)
            event = "subscriber.unsubscribed"
        else:
            written, event = subscription, ""
        if written is None:  # a concurrent request got there first
            current = await subscription_queries.get_by_id(conn, subscription.id)
            assert current is not None
            return current
        if event:
            owners = owners or await owners_of(conn, written)
            await subscriber_event(self._ctx, conn, event, *owners, **event_data)
            log.info(event.replace("subscriber.", "subscription."), subscription_id=written.id)
        if transition.ask_to_confirm:
            # A fresh link, rendered and minted when the mail is sent; earlier unexpired
            # links stay valid (AUD-5).
            await queue_confirmation_email(
                self._ctx,
                conn,
                subscriber_id=written.subscriber_id,
                newsletter_id=written.newsletter_id,
            )
        return written


async def owners_of(conn: AsyncConnection, subscription: SubscriptionRow) -> Owners:
    subscriber = await subscriber_queries.get(conn, subscription.subscriber_id)
    newsletter = await newsletter_queries.get_by_id(conn, subscription.newsletter_id)
    if subscriber is None or newsletter is None:  # both are FK-protected; cannot happen
        raise NotFound("the subscription's subscriber or newsletter is gone")
    return subscriber, newsletter
