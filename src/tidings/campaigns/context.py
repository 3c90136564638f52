"""What the sending use cases share: the database, the queue, the clock, the drafts they render
from, the webhook outbox, the site secret for link tokens, and the send policy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from tidings.campaigns.drafts import CampaignDrafts
from tidings.domain.jobs import ClaimLost
from tidings.outbound.webhooks import Webhooks
from tidings.queue.job import Job
from tidings.queue.service import JobQueue
from tidings.storage.database import Database
from tidings.storage.sending import campaign_sends as send_queries


@dataclass(frozen=True, slots=True)
class SendPolicy:
    """The `bulk_email` settings, as the engine uses them."""

    batch_size: int = 1000
    batch_creation_concurrency: int = 2
    in_flight_chunk: int = 20
    submission_concurrency: int = 8
    recipient_retries: int = 2
    send_deadline_seconds: float = 10.0
    warming_domain: str | None = None
    warming_daily_capacity: int = 0
    # The domain batches are sent from when not warming: a batch API's sending domain, or
    # (None) the newsletter's own sender domain.
    sending_domain: str | None = None
    delivery_spread: timedelta | None = None  # batch providers: spread delivery over this
    discard_chunk: int = 5000


@dataclass(frozen=True)
class SendingContext:
    db: Database
    queue: JobQueue
    now: Callable[[], datetime]
    drafts: CampaignDrafts
    webhooks: Webhooks
    secret: Callable[[], str]
    policy: SendPolicy

    async def release_status_lock(self, job: Job, campaign_id: int) -> None:
        """Give the campaign's status lock back (SND-2), if this job still holds its claim;
        a job that lost it has nothing to release (the lock lapsed with its lease)."""
        try:
            async with self.queue.fenced(job) as conn:
                await send_queries.release_lock(conn, campaign_id, token=str(job.claim_token))
        except ClaimLost:
            pass
