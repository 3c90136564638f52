"""Writing consent decisions to one subscription, in the caller's transaction (PRI-6): the row,
the `subscriber.confirmed`/`subscriber.unsubscribed` event, and the confirmation email. What
to write is decided by `tidings.domain.consent`; this module only carries it out."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.audience.context import AudienceContext
from tidings.audience.events import subscriber_event
from tidings.delivery.email_jobs import TransactionalEmail
from tidings.domain import tokens
from tidings.domain.audience import Source
from tidings.domain.consent import SubscriptionState, Transition, subscription_state
from tidings.domain.errors import NotFound
from tidings.rendering.notice import render_confirmation_email
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
            written = await self._ask_to_confirm(
                conn, written, owners or await owners_of(conn, written), now
            )
        return written

    async def _ask_to_confirm(
        self, conn: AsyncConnection, subscription: SubscriptionRow, owners: Owners, now: datetime
    ) -> SubscriptionRow:
        """A fresh link; earlier unexpired ones stay valid. The dedupe key is a fingerprint of
        the token, so the raw token (a bearer secret) is never copied anywhere (AUD-5)."""
        subscriber, newsletter = owners
        token = tokens.new_confirmation_token()
        token_hash = tokens.hash_token(token)
        subscription = await subscription_queries.update_subscription(
            conn,
            subscription.id,
            confirm_token_hash=token_hash,
            confirm_token_expires_at=now + timedelta(hours=self._ctx.confirm_token_ttl_hours),
            updated_at=now,
        )
        notice = render_confirmation_email(
            site_name=self._ctx.site_name,
            newsletter_name=newsletter.name,
            confirm_url=self._ctx.confirm_url(token),
            expires_hours=self._ctx.confirm_token_ttl_hours,
            engine=self._ctx.templates,
            theme=self._ctx.theme,
        )
        await self._ctx.mailer.queue_in(
            conn,
            TransactionalEmail(
                to=subscriber.email,
                subject=notice.subject,
                text=notice.text,
                html=notice.html,
                sender=newsletter.sender_address,
                sender_name=newsletter.sender_name,
                reply_to=newsletter.reply_to,
            ),
            idempotency_key=tokens.confirmation_dedupe_key(token_hash),
        )
        return subscription


async def owners_of(conn: AsyncConnection, subscription: SubscriptionRow) -> Owners:
    subscriber = await subscriber_queries.get(conn, subscription.subscriber_id)
    newsletter = await newsletter_queries.get_by_id(conn, subscription.newsletter_id)
    if subscriber is None or newsletter is None:  # both are FK-protected; cannot happen
        raise NotFound("the subscription's subscriber or newsletter is gone")
    return subscriber, newsletter
