"""The feed job kinds and their payloads: read a due feed, send the digest it made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tidings.queue.job import JobPayload

RUN_FEED = "run_feed"
SEND_DIGEST = "send_digest"


@dataclass(frozen=True, slots=True)
class RunFeed(JobPayload):
    """Read the newsletter's feed due at `due_at` (Unix seconds) and make its digest. The key
    names the due time, so the workers that all see a feed due queue it once."""

    newsletter_id: int
    due_at: int
    kind: ClassVar[str] = RUN_FEED

    @property
    def idempotency_key(self) -> str:
        return f"{RUN_FEED}:{self.newsletter_id}:{self.due_at}"


@dataclass(frozen=True, slots=True)
class SendDigest(JobPayload):
    """Send a digest made in `send` mode; queued in the transaction that made it."""

    campaign_id: int
    kind: ClassVar[str] = SEND_DIGEST

    @property
    def idempotency_key(self) -> str:
        return f"{SEND_DIGEST}:{self.campaign_id}"
