"""The `request_consent` job: the part of a public subscribe that depends on the address's
state, deferred from the request (AUD-5).

A subscribe request only records the address and queues this job, so it does the same work
for a new, pending, confirmed, unsubscribed or suppressed address and its timing tells a
stranger nothing. The job then creates, revives or leaves the subscription, publishes
`subscriber.created` for a new address and queues the confirmation email, all under its claim
(fenced) in one transaction: it happens exactly when the job completes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import ClassVar

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.audience.consent import ConsentRecorder
from tidings.audience.context import AudienceContext
from tidings.audience.subscriber_events import subscriber_event
from tidings.audience.tracking_consent import ask_at_confirmation, record_tracking_consent
from tidings.domain.audience import Source
from tidings.domain.tracking_consent import ConsentSource
from tidings.queue.job import Job, JobPayload
from tidings.storage import newsletters as newsletter_queries
from tidings.storage import subscribers as subscriber_queries
from tidings.storage import suppressions as suppression_queries

REQUEST_CONSENT = "request_consent"
log = structlog.get_logger("tidings.audience")


@dataclass(frozen=True, slots=True)
class ConsentRequest(JobPayload):
    """Someone asked, through the public form or API, to subscribe this subscriber."""

    kind: ClassVar[str] = REQUEST_CONSENT
    subscriber_id: int
    newsletter_id: int
    source: Source
    new_subscriber: bool  # the request created the subscriber row
    # The form's unticked tracking box was ticked (ENG-1); absent from older payloads.
    tracking_consent: bool = False


async def queue_consent_request(
    context: AudienceContext, conn: AsyncConnection, request: ConsentRequest
) -> None:
    """Queue the request in the caller's transaction (PRI-6); every request is its own job."""
    key = f"{REQUEST_CONSENT}:{uuid.uuid4().hex}"
    await context.queue.enqueue(conn, request.kind, key, request.to_payload())


class ConsentRequestHandler:
    """Carries out a `request_consent` job."""

    def __init__(self, context: AudienceContext) -> None:
        self._ctx = context
        self._consent = ConsentRecorder(context)

    async def __call__(self, job: Job) -> None:
        request = ConsentRequest.from_job(job)
        async with self._ctx.queue.fenced(job) as conn:
            await self._carry_out(conn, request)

    async def _carry_out(self, conn: AsyncConnection, request: ConsentRequest) -> None:
        subscriber = await subscriber_queries.get(conn, request.subscriber_id)
        newsletter = await newsletter_queries.get_by_id(conn, request.newsletter_id)
        if subscriber is None or newsletter is None:  # deleted since the request
            log.info("subscribe.target_gone", subscriber_id=request.subscriber_id)
            return
        if request.new_subscriber:
            await subscriber_event(
                self._ctx,
                conn,
                "subscriber.created",
                subscriber,
                newsletter,
                source=request.source.value,
            )
        if await suppression_queries.is_suppressed(conn, subscriber.email_hash):
            log.info("subscribe.suppressed_address", subscriber_id=subscriber.id)
            return
        now = self._ctx.now()
        written = await self._consent.request(
            conn, subscriber, newsletter, source=request.source, now=now
        )
        if not request.tracking_consent:
            if written.tracking_consent_asked_at is not None and written.confirmed_at is None:
                # The latest request governs what its confirmation link agrees to.
                await ask_at_confirmation(conn, written, now=None)
            return
        if written.confirmed_at is None:
            # Recorded when the person confirms by their own link, never on a form post
            # anyone could have made with their address.
            await ask_at_confirmation(conn, written, now=now)
        elif not newsletter.double_opt_in:
            # Single opt-in: this post is the act that subscribes, and so the act that consents.
            await record_tracking_consent(
                conn, subscriber, True, source=ConsentSource.SIGNUP, now=now
            )
