"""Following a feed (AUT-2): set it up (checked by reading it once), stop, show, run by hand;
and the workers' side: queue the feeds that are due, run them, send `send`-mode digests.

The periodic task only queues: each due feed becomes a `run_feed` job keyed by its due time,
so however many workers see it due, one job exists and one worker holds it; that job's
writes are fenced by its claim (DLV-2). A run by hand (`feed-run`, the API, the page) reads
at once in the caller's process; it shares the step, and so its guarantees.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.campaigns.feeds.jobs import RunFeed, SendDigest
from tidings.campaigns.feeds.step import FeedStep, RunResult, Superseded
from tidings.delivery.feed_client import FeedClient
from tidings.delivery.feed_parsing import FeedUnavailable
from tidings.delivery.ssrf import validated_url
from tidings.domain import feeds as rules
from tidings.domain.errors import Conflict, InvalidInput, NotFound, TidingsError
from tidings.domain.jobs import ClaimLost
from tidings.queue.job import Job
from tidings.queue.service import JobQueue
from tidings.storage import feeds as queries
from tidings.storage import newsletters as newsletter_queries
from tidings.storage.database import Database
from tidings.storage.feeds import FeedRow, TakenItem
from tidings.storage.newsletters import NewsletterRow

log = structlog.get_logger("tidings.campaigns")
DUE_PER_ROUND = 100  # feeds queued per periodic round; the next round takes the rest
SendCampaign = Callable[[int], Awaitable[object]]


class FeedRunFailed(TidingsError):
    """A run by hand could not read the feed; the failure is recorded on the feed too."""

    code = "feed_unavailable"
    title = "The feed could not be read"


@dataclass(frozen=True, slots=True)
class FeedView:
    """A newsletter's feed as its page shows it, with the items digests took last."""

    newsletter: NewsletterRow
    feed: FeedRow
    recent: list[TakenItem]


class Feeds:
    def __init__(
        self,
        db: Database,
        queue: JobQueue,
        now: Callable[[], datetime],
        step: FeedStep,
        client: Callable[[], FeedClient],
        *,
        allow_private_networks: bool,
        send: SendCampaign,
    ) -> None:
        self._db = db
        self._queue = queue
        self._now = now
        self._step = step
        self._client = client
        self._allow_private_networks = allow_private_networks
        self._send = send

    # -- configuration ----------------------------------------------------------------------

    async def follow(self, slug: str, url: str, every: str, mode: str) -> FeedRow:
        """Follow `url` on schedule `every` in `mode`, replacing any feed the newsletter had.
        Everything is checked first, the feed by reading it once: a URL that does not give
        an RSS or Atom feed now is refused, and nothing changes."""
        url = validated_url(
            url, allow_private_networks=self._allow_private_networks, refused_by="feeds"
        )
        schedule = rules.FeedSchedule.parse(every)
        chosen = rules.parse_mode(mode)
        async with self._db.read() as conn:
            newsletter = await self._newsletter(conn, slug)
        try:
            await self._client().read(url)
        except FeedUnavailable as failure:
            raise InvalidInput(
                f"url: the feed could not be read ({failure.detail}); nothing was changed",
                field="url",
            ) from None
        now = self._now()
        async with self._db.write() as conn:
            before = await queries.get(conn, newsletter.id)
            changes: dict[str, Any] = {
                "schedule": str(schedule),
                "mode": chosen.value,
                "next_run_at": self._step.next_run(str(schedule), now),
                "updated_at": now,
            }
            if before is None:
                row = await queries.insert(
                    conn,
                    newsletter_id=newsletter.id,
                    url=url,
                    followed_at=now,
                    created_at=now,
                    **changes,
                )
            else:
                if before.url != url:  # another feed: its state starts afresh
                    changes |= {"url": url, "followed_at": now, "etag": None}
                    changes |= {"last_modified": None, "last_error": None, "failures": 0}
                changed = await queries.change(conn, newsletter.id, **changes)
                assert changed is not None
                row = changed
        log.info("feed.followed", newsletter_id=newsletter.id, mode=chosen.value)
        return row

    async def stop(self, slug: str) -> bool:
        """Stop following; False when the newsletter followed no feed. The items already sent
        stay recorded, so following the feed again never sends them twice."""
        async with self._db.write() as conn:
            newsletter = await self._newsletter(conn, slug)
            removed = await queries.remove(conn, newsletter.id)
        if removed:
            log.info("feed.stopped", newsletter_id=newsletter.id)
        return removed

    async def get(self, slug: str, *, recent: int = 10) -> FeedView | None:
        """The newsletter's feed and its last taken items; None when it follows none."""
        async with self._db.read() as conn:
            newsletter = await self._newsletter(conn, slug)
            feed = await queries.get(conn, newsletter.id)
            if feed is None:
                return None
            items = await queries.recent_items(conn, newsletter.id, limit=recent)
        return FeedView(newsletter, feed, items)

    # -- running ----------------------------------------------------------------------------

    async def run_now(self, slug: str) -> RunResult:
        """Read the feed now, outside its schedule, and make a digest of what is new.
        `FeedRunFailed` when it cannot be read (recorded on the feed, with the next try)."""
        async with self._db.read() as conn:
            newsletter = await self._newsletter(conn, slug)
            feed = await queries.get(conn, newsletter.id)
        if feed is None:
            raise NotFound(f"newsletter {slug!r} follows no feed", field="feed")
        try:
            result = await self._step.run(feed, now=self._now(), write=self._db.write, due_at=None)
        except Superseded as superseded:
            raise Conflict(superseded.detail) from None
        if result.error is not None:
            raise FeedRunFailed(
                f"the feed could not be read: {result.error}; next try at "
                f"{result.feed.next_run_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
            )
        return result

    async def queue_due(self) -> int:
        """The periodic task: a `run_feed` job per feed due now (one per due time, whoever
        queues it). Returns how many feeds are due."""
        async with self._db.write() as conn:
            due = await queries.due(conn, self._now(), limit=DUE_PER_ROUND)
            for newsletter_id, due_at in due:
                step = RunFeed(newsletter_id, int(due_at.timestamp()))
                # `revive`: a finished job for a time the feed is still due at ended without
                # recording anything (it gave up), so the feed is read again, not stuck.
                await self._queue.enqueue(
                    conn, step.kind, step.idempotency_key, step.to_payload(), revive=True
                )
        return len(due)

    async def run_job(self, job: Job) -> None:
        """The `run_feed` job: read the feed if it is still due at the job's time."""
        step = RunFeed.from_job(job)
        due_at = datetime.fromtimestamp(step.due_at, UTC)
        async with self._db.read() as conn:
            feed = await queries.get(conn, step.newsletter_id)
        if feed is None or feed.next_run_at != due_at:
            return  # stopped, rescheduled or already read: nothing is due at this time
        try:
            await self._step.run(
                feed, now=self._now(), write=lambda: self._queue.fenced(job), due_at=due_at
            )
        except Superseded:
            log.info("feed.superseded", newsletter_id=step.newsletter_id)

    async def send_job(self, job: Job) -> None:
        """The `send_digest` job: send a `send`-mode digest. One that cannot be sent (nobody
        to send it to, the placeholder identity) stays a draft, and the feed says why."""
        step = SendDigest.from_job(job)
        try:
            await self._send(step.campaign_id)
        except (ClaimLost, NotFound):
            return
        except TidingsError as refused:
            if isinstance(refused, Conflict) and refused.code == Conflict.code:
                return  # no longer a draft: someone sent, scheduled or cancelled it
            await self._note_unsent(job, step.campaign_id, refused.detail)

    async def _note_unsent(self, job: Job, campaign_id: int, detail: str) -> None:
        async with self._queue.fenced(job) as conn:
            campaign_feed = await queries.feed_of_campaign(conn, campaign_id)
            if campaign_feed is None:
                return
            await queries.change(
                conn,
                campaign_feed,
                last_error=f"digest campaign {campaign_id} was left as a draft: {detail}"[:500],
                updated_at=self._now(),
            )
        log.warning("feed.digest_unsent", campaign_id=campaign_id)

    async def _newsletter(self, conn: AsyncConnection, slug: str) -> NewsletterRow:
        newsletter = await newsletter_queries.get_by_slug(conn, slug)
        if newsletter is None:
            raise NotFound(f"no newsletter called {slug!r}", field="newsletter")
        return newsletter
