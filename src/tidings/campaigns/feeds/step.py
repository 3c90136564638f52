"""The digest step (AUT-2): read a feed, then in one transaction take its new items, make the
digest campaign from them and record the feed's state.

Never twice: items are taken by inserting them under a unique (newsletter, item) key, in the
transaction that inserts the campaign, links the items to it, queues its send (in `send`
mode) and moves the feed's next run on. A crash anywhere before the commit leaves none of
it, so the next read finds the same items new; after the commit the items are known, so no
later read can take them again. Two reads at once (a worker and a run by hand) cannot share
an item: the second waits on the key and skips what the first took. No new item: no
campaign, only the feed's state changes.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import structlog
from jinja2 import Environment
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.campaigns.feeds.jobs import SendDigest
from tidings.delivery.feed_client import FeedClient, FeedRead, Validators
from tidings.delivery.feed_parsing import FeedItem, FeedUnavailable
from tidings.domain import feeds as rules
from tidings.domain.errors import InvalidInput, TidingsError
from tidings.queue.service import JobQueue
from tidings.rendering import check_content
from tidings.rendering.feed_digest import DigestItem, digest_content
from tidings.storage import campaigns as campaign_queries
from tidings.storage import feeds as queries
from tidings.storage import newsletters as newsletter_queries
from tidings.storage.feeds import FeedRow, NewItem

log = structlog.get_logger("tidings.campaigns")
Writer = Callable[[], AbstractAsyncContextManager[AsyncConnection]]
MAX_ERROR = 500


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    base_seconds: float
    cap_seconds: float


@dataclass(frozen=True, slots=True)
class RunResult:
    """What one read did: the digest made (or None), its item count, and the feed after."""

    campaign_id: int | None
    item_count: int
    not_modified: bool
    error: str | None
    feed: FeedRow


class Superseded(TidingsError):
    """The feed was changed (a new schedule, a run by hand) while this read was under way."""

    code = "feed_run_superseded"


def _whole_seconds(moment: datetime) -> datetime:
    # Due times travel in job payloads as Unix seconds and are compared for equality.
    return moment.replace(microsecond=0)


@dataclass(frozen=True, slots=True)
class Candidate:
    item: FeedItem
    new: NewItem


def candidates(document_items: tuple[FeedItem, ...], since: datetime) -> list[Candidate]:
    """The items that may be news, oldest first: identifiable (guid or link), and not dated
    before the feed was followed."""
    found: dict[str, Candidate] = {}
    for item in reversed(document_items):  # feeds list newest first
        key = rules.item_key(item.guid, item.link)
        if key is None or (item.published is not None and item.published < since):
            continue
        digest = rules.key_hash(key)
        found.setdefault(
            digest,
            Candidate(
                item, NewItem(digest, key[: rules.MAX_ITEM_KEY], item.title[:500], item.link)
            ),
        )
    far_future = datetime.max.replace(tzinfo=UTC)
    # Undated items keep their place at the new end; `sorted` is stable.
    return sorted(found.values(), key=lambda found: found.item.published or far_future)


class FeedStep:
    def __init__(
        self,
        *,
        queue: JobQueue,
        client: Callable[[], FeedClient],
        environment: Environment,
        zone: ZoneInfo,
        retry: RetryPolicy,
    ) -> None:
        self._queue = queue
        self._client = client
        self._environment = environment
        self._zone = zone
        self._retry = retry

    def next_run(self, schedule: str, after: datetime) -> datetime:
        return _whole_seconds(rules.FeedSchedule.parse(schedule).next_after(after, self._zone))

    async def run(
        self, feed: FeedRow, *, now: datetime, write: Writer, due_at: datetime | None
    ) -> RunResult:
        """Read `feed` and record the outcome through `write` (a fenced transaction for a
        job). With `due_at`, only if the feed is still due then (`Superseded` otherwise)."""
        try:
            read = await self._client().read(feed.url, Validators(feed.etag, feed.last_modified))
            async with write() as conn:
                return await self._record(conn, feed, read, now=now, due_at=due_at)
        except FeedUnavailable as failure:
            return await self._failed(feed, failure.detail, now=now, write=write, due_at=due_at)
        except InvalidInput as refused:  # the digest could not be made (its content refused)
            detail = f"the digest could not be made: {refused.detail}"
            return await self._failed(feed, detail, now=now, write=write, due_at=due_at)

    async def _record(
        self,
        conn: AsyncConnection,
        feed: FeedRow,
        read: FeedRead,
        *,
        now: datetime,
        due_at: datetime | None,
    ) -> RunResult:
        campaign_id, taken = None, 0
        if read.document is not None:
            campaign_id, taken = await self._digest(conn, feed, read, now=now)
        validators = read.validators
        updated = await queries.change(
            conn,
            feed.newsletter_id,
            due_at=due_at,
            etag=validators.etag,
            last_modified=validators.last_modified,
            last_run_at=now,
            last_success_at=now,
            last_error=None,
            failures=0,
            next_run_at=self.next_run(feed.schedule, now),
            last_campaign_id=campaign_id if campaign_id is not None else feed.last_campaign_id,
            updated_at=now,
        )
        if updated is None:
            raise Superseded("the feed changed while it was read; nothing was recorded")
        log.info(
            "feed.read",
            newsletter_id=feed.newsletter_id,
            campaign_id=campaign_id,
            items=taken,
            not_modified=read.document is None,
        )
        return RunResult(campaign_id, taken, read.document is None, None, updated)

    async def _digest(
        self, conn: AsyncConnection, feed: FeedRow, read: FeedRead, *, now: datetime
    ) -> tuple[int | None, int]:
        assert read.document is not None
        found = candidates(read.document.items, feed.followed_at)
        known = await queries.known_keys(
            conn, feed.newsletter_id, [found.new.key_hash for found in found]
        )
        fresh = [found for found in found if found.new.key_hash not in known]
        fresh = fresh[: rules.MAX_DIGEST_ITEMS]  # the rest wait for the next digest
        taken = await queries.take_items(
            conn, feed.newsletter_id, [found.new for found in fresh], now=now
        )
        chosen = [found for found in fresh if found.new.key_hash in taken]
        if not chosen:
            return None, 0
        newsletter = await newsletter_queries.get_by_id(conn, feed.newsletter_id)
        assert newsletter is not None  # the feed goes with it (CASCADE)
        content = digest_content(
            self._environment,
            [
                DigestItem(found.item.title, found.item.link, found.item.summary, found.item.image)
                for found in reversed(chosen)  # newest first
            ],
            fallback_title=read.document.title or newsletter.name,
        )
        check_content(content)
        campaign = await campaign_queries.insert_campaign(
            conn,
            newsletter_id=feed.newsletter_id,
            status="draft",
            subject=content.subject,
            preheader=content.preheader,
            body=content.body,
            body_format=content.body_format,
            audience_filter="",
            archive_public=True,
            created_at=now,
            updated_at=now,
        )
        await queries.assign_campaign(
            conn, feed.newsletter_id, [found.new.key_hash for found in chosen], campaign.id
        )
        if feed.mode == rules.FeedMode.SEND:
            send = SendDigest(campaign.id)
            await self._queue.enqueue(conn, send.kind, send.idempotency_key, send.to_payload())
        return campaign.id, len(chosen)

    async def _failed(
        self,
        feed: FeedRow,
        detail: str,
        *,
        now: datetime,
        write: Writer,
        due_at: datetime | None,
    ) -> RunResult:
        failures = feed.failures + 1
        delay = rules.retry_delay(
            failures, base_seconds=self._retry.base_seconds, cap_seconds=self._retry.cap_seconds
        )
        async with write() as conn:
            updated = await queries.change(
                conn,
                feed.newsletter_id,
                due_at=due_at,
                last_run_at=now,
                last_error=detail[:MAX_ERROR],
                failures=failures,
                next_run_at=_whole_seconds(now + delay),
                updated_at=now,
            )
        if updated is None:
            raise Superseded("the feed changed while it was read; nothing was recorded")
        log.warning("feed.failed", newsletter_id=feed.newsletter_id, failures=failures)
        return RunResult(None, 0, False, detail, updated)
