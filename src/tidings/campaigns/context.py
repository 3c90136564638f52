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
    """The `bulk_email` settings the engine reads (their defaults are defined there, once)."""

    batch_size: int
    batch_creation_concurrency: int
    warming_domain: str | None
    warming_daily_capacity: int
    # The domain batches are sent from when not warming: a batch API's sending domain, or
    # (None) the newsletter's own sender domain.
    sending_domain: str | None
    delivery_spread: timedelta | None  # batch providers: spread delivery over this
    discard_chunk: int = 5000  # rows a discarded preparation deletes per statement


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
