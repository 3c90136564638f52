"""Asking pending subscribers to confirm (AUD-5, AUD-9): after an import, the double opt-in
email to every subscription of a newsletter still waiting for its person, through the queue
and at a bounded rate, so a large list never reaches the relay at once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from tidings.audience.context import AudienceContext
from tidings.audience.subscriber_mail import queue_confirmation_email
from tidings.domain.errors import InvalidInput, NotFound
from tidings.storage import newsletters as newsletter_queries
from tidings.storage import subscriptions as subscription_queries

log = structlog.get_logger("tidings.audience")
MAX_BATCH = 100


class PendingConfirmations:
    def __init__(self, context: AudienceContext) -> None:
        self._ctx = context

    async def ask(
        self,
        newsletter_slug: str,
        *,
        rate_per_second: float,
        on_progress: Callable[[int], None] | None = None,
    ) -> int:
        """Queue a confirmation email for each pending, unsuppressed subscription of the
        newsletter, at most `rate_per_second` a second; returns how many were queued. Each
        batch is selected and queued in one transaction, so a subscription confirmed or left
        meanwhile is not asked."""
        if not 0 < rate_per_second <= 10_000:
            raise InvalidInput("the rate must be above 0 and at most 10000 a second", field="rate")
        async with self._ctx.db.read() as conn:
            newsletter = await newsletter_queries.get_by_slug(conn, newsletter_slug)
        if newsletter is None:
            raise NotFound(f"no newsletter called {newsletter_slug!r}", field="newsletter")
        batch = max(1, min(MAX_BATCH, int(rate_per_second)))
        loop = asyncio.get_running_loop()
        started = loop.time()
        queued, after_id = 0, 0
        while True:
            async with self._ctx.db.write() as conn:
                page = await subscription_queries.pending_page(
                    conn, newsletter.id, after_id=after_id, limit=batch
                )
                for subscription in page:
                    # The one function that queues a confirmation email: the link is minted
                    # when the job sends it, and earlier unexpired links stay valid.
                    await queue_confirmation_email(
                        self._ctx,
                        conn,
                        subscriber_id=subscription.subscriber_id,
                        newsletter_id=subscription.newsletter_id,
                    )
            if not page:
                break
            queued += len(page)
            after_id = page[-1].id
            if on_progress is not None:
                on_progress(queued)
            if len(page) < batch:
                break
            # Pace by the total so far: a slow batch is not followed by a burst.
            await asyncio.sleep(max(0.0, started + queued / rate_per_second - loop.time()))
        log.info("subscribers.confirmations_requested", newsletter_id=newsletter.id, count=queued)
        return queued
