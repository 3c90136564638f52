"""Recipient preparation (SPEC §5.3): select the audience once, write it as batches, verify,
and freeze it with `prepared_at`. Runs inside the send job, under the campaign's status lock;
every write goes through the queue's fenced transaction, so a job that lost its claim stops.

The bulk work stays in the database: selection is one INSERT … SELECT into the candidate
list, and each page is an INSERT … SELECT of at most one batch's rows. Python only ever holds
page boundaries, so memory is flat in the audience size.
"""

from __future__ import annotations

import asyncio
import contextlib
import time as clock
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, time
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.campaigns import send_events
from tidings.campaigns.context import SendingContext
from tidings.campaigns.drafts import CampaignDraft
from tidings.campaigns.verification import check_ab_accounting, check_frozen, check_ownership
from tidings.domain.ab_tests import assignment_key, segment_order
from tidings.domain.errors import TidingsError
from tidings.domain.jobs import ClaimLost
from tidings.domain.sending import (
    ACTIVE,
    Page,
    SegmentRange,
    VerificationFailed,
    check_count,
    drift_is_notable,
    plan_pages,
)
from tidings.queue.job import Job
from tidings.storage import ab_tests as ab_queries
from tidings.storage.sending import batch_pages as page_queries
from tidings.storage.sending import batches as batch_queries
from tidings.storage.sending import campaign_sends as send_queries
from tidings.storage.sending import candidates as candidate_queries
from tidings.storage.sending.campaign_sends import SendRow

log = structlog.get_logger("tidings.campaigns")
PAGE_TRIES = 3


class PreparationInterrupted(TidingsError):
    """The worker began shutting down before every page was written (SND-21). Nothing failed:
    the pages written so far stay until the next attempt discards them and starts over."""

    code = "preparation_interrupted"


class Preparation:
    def __init__(self, context: SendingContext) -> None:
        self._ctx = context
        self.timings: dict[str, float] = {}  # seconds per phase of the last preparation

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        started = clock.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = round(clock.perf_counter() - started, 4)

    def _stop_if_shutting_down(self, stage: str) -> None:
        """SND-21: take no new step of preparation once the worker is shutting down."""
        if self._ctx.queue.stopping.is_set():
            raise PreparationInterrupted(f"the worker is shutting down ({stage})")

    async def prepare(self, job: Job, draft: CampaignDraft, send: SendRow) -> int:
        """Prepare the campaign's recipients; returns the number of candidates.

        At shutdown no new page is started; pages in flight finish. If every page is then
        written, verification runs and `prepared_at` is saved (the work is kept); otherwise
        `PreparationInterrupted` is raised and a later attempt starts over (SND-8)."""
        campaign_id = draft.campaign.id
        self.timings = {}
        self._stop_if_shutting_down("before discarding")
        with self._phase("discard"):
            await self._discard_unprepared(job, campaign_id)
        fenced = self._ctx.queue.fenced
        self._stop_if_shutting_down("before selection")
        with self._phase("selection"):
            candidate_count, ranges, warm_left = await self._select(job, draft)
        log.info("campaign.audience_selected", campaign_id=campaign_id, candidates=candidate_count)
        policy = self._ctx.policy
        pages = plan_pages(
            ranges,
            batch_size=policy.batch_size,
            fallback_domain=policy.sending_domain
            or draft.newsletter.sender_address.rpartition("@")[2],
            warming_domain=policy.warming_domain,
            warming_remaining=warm_left,
        )
        with self._phase("pages"):
            await self._write_pages(job, campaign_id, pages)
        with self._phase("verification"):
            async with fenced(job) as conn:
                excluded = await self._verify(conn, campaign_id, candidate_count)
                await send_queries.update_send(
                    conn,
                    campaign_id,
                    candidate_count=candidate_count,
                    preparation_excluded_count=excluded,
                    prepared_at=self._ctx.now(),
                    # ENG-1: the mode every batch renders under, frozen with the snapshot.
                    tracking=draft.newsletter.tracking,
                    updated_at=self._ctx.now(),
                )
        if drift_is_notable(send.preflight_email_count, candidate_count):
            send_events.audience_drift(
                campaign_id, preflight=send.preflight_email_count, consumed=candidate_count
            )
        log.info("campaign.prepared", campaign_id=campaign_id, batches=len(pages), **self.timings)
        return candidate_count

    async def _select(self, job: Job, draft: CampaignDraft) -> tuple[int, list[SegmentRange], int]:
        campaign_id = draft.campaign.id
        segments, split = draft.segments, None
        if draft.ab is not None:
            # ENG-8: each candidate's variant (or the remainder) is part of the snapshot, by a
            # keyed hash of (campaign, subscriber), so every attempt assigns the same.
            test = draft.ab.test
            key = assignment_key(self._ctx.secret(), campaign_id)
            segments = segment_order(draft.segments, test.variant_count)

            def split(subscriber: Any, tier: Any) -> Any:
                return ab_queries.segment_expression(subscriber, tier, key, test)

        async with self._ctx.queue.fenced(job) as conn:
            candidate_count = await candidate_queries.select_candidates(
                conn, campaign_id, draft.newsletter.id, draft.audience, segments, split=split
            )
            ranges = await candidate_queries.segment_ranges(conn, campaign_id)
            warm_left = await self._warming_left(conn)
            # The status's total while pages are written (SND-17); verified before
            # `prepared_at`, and rewritten by any rebuild.
            await send_queries.update_send(conn, campaign_id, candidate_count=candidate_count)
        return candidate_count, ranges, warm_left

    async def _discard_unprepared(self, job: Job, campaign_id: int) -> None:
        """SND-8: an attempt without `prepared_at` starts over, deleting the partial work in
        bounded steps; a batch that already left `pending` blocks it (investigate first)."""
        async with self._ctx.queue.fenced(job) as conn:
            if await batch_queries.count_not_pending(conn, campaign_id):
                raise VerificationFailed("unprepared_batch_not_pending")
        await self._drop_candidates(job, campaign_id)
        while True:
            self._stop_if_shutting_down("discarding")
            async with self._ctx.queue.fenced(job) as conn:
                removed = await batch_queries.discard_some(
                    conn, campaign_id, limit=self._ctx.policy.discard_chunk
                )
            if not removed:
                return

    async def drop_candidates(self, job: Job, campaign_id: int) -> None:
        """Clean-up once preparation is verified (or before a rebuild): the candidate list
        is not needed after `prepared_at`. Bounded steps, outside the preparation's time."""
        with self._phase("candidates_dropped"):
            await self._drop_candidates(job, campaign_id)

    async def _drop_candidates(self, job: Job, campaign_id: int) -> None:
        while True:
            async with self._ctx.queue.fenced(job) as conn:
                removed = await candidate_queries.delete_candidates(
                    conn, campaign_id, limit=self._ctx.policy.discard_chunk
                )
            if not removed:
                return

    async def _warming_left(self, conn: AsyncConnection) -> int:
        policy = self._ctx.policy
        if not policy.warming_domain or policy.warming_daily_capacity <= 0:
            return 0
        midnight = datetime.combine(self._ctx.now().astimezone(UTC).date(), time(), tzinfo=UTC)
        used = await batch_queries.allocated_since(conn, policy.warming_domain, midnight)
        return max(0, policy.warming_daily_capacity - used)

    async def _write_pages(self, job: Job, campaign_id: int, pages: list[Page]) -> None:
        """Pages with bounded concurrency (SND-4); each worker owns its page through writes
        and retries. The first failure, or shutdown, stops the others from taking new pages;
        pages in flight finish. Raises `PreparationInterrupted` if shutdown left any unwritten."""
        todo = iter(pages)
        failure: list[BaseException] = []
        written = 0
        stopping = self._ctx.queue.stopping

        async def worker() -> None:
            nonlocal written
            for page in todo:
                if failure or stopping.is_set():
                    return
                try:
                    await self._write_page(job, campaign_id, page)
                except BaseException as exc:
                    failure.append(exc)
                    raise
                written += 1

        concurrency = max(1, self._ctx.policy.batch_creation_concurrency)
        results = await asyncio.gather(
            *(worker() for _ in range(concurrency)), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result
        if written < len(pages):
            log.info(
                "campaign.preparation_interrupted",
                campaign_id=campaign_id,
                pages_written=written,
                pages=len(pages),
            )
            raise PreparationInterrupted("the worker is shutting down (pages left unwritten)")

    async def _write_page(self, job: Job, campaign_id: int, page: Page) -> None:
        """One page, one transaction; a database error is retried with the same page identity
        (campaign, page number). A retry first looks for what an earlier try committed though
        it never heard back (`_recovered`); the first try cannot find anything, since the
        attempt's earlier work was discarded before selection."""
        for attempt in range(1, PAGE_TRIES + 1):
            try:
                async with self._ctx.queue.fenced(job) as conn:
                    if await send_queries.status(conn, campaign_id) not in ACTIVE:
                        # Paused or cancelled (SND-23): stop at this page boundary; what is
                        # written waits for resume (which starts the preparation over).
                        raise PreparationInterrupted("the send was paused or cancelled")
                    recovered = None
                    if attempt > 1:
                        recovered = await self._recovered(conn, campaign_id, page)
                    result = recovered or await page_queries.create_page_batch(
                        conn, campaign_id, page, now=self._ctx.now()
                    )
                break
            except (VerificationFailed, ClaimLost, PreparationInterrupted):
                raise
            except Exception as exc:
                stopping = self._ctx.queue.stopping
                if attempt == PAGE_TRIES or stopping.is_set():
                    raise  # at shutdown a failed page is not retried: the next attempt redoes it
                log.warning(
                    "campaign.page_retry",
                    campaign_id=campaign_id,
                    page=page.page,
                    error_type=type(exc).__name__,
                )
                with contextlib.suppress(TimeoutError):  # shutdown cuts the pause short
                    async with asyncio.timeout(0.2 * attempt):
                        await stopping.wait()
                if stopping.is_set():
                    raise
        for member_id, _position, reason in result.exclusions:
            send_events.excluded(
                "preparation",
                campaign_id,
                member_id,
                reason,
                batch_id=result.batch_id,
                page=page.page,
            )

    async def _recovered(
        self, conn: AsyncConnection, campaign_id: int, page: Page
    ) -> page_queries.PageResult | None:
        """What an earlier try of this page committed, or None if nothing: its batch (accepted
        only if it matches the page and holds the rows it counts) with the page's exclusions,
        or only exclusions for a page where nothing was sendable."""
        existing = await batch_queries.get_page(conn, campaign_id, page.page)
        exclusions = await page_queries.page_exclusions(conn, campaign_id, page)
        if existing is not None:
            await self._check_recovered(conn, campaign_id, page, existing)
            return page_queries.PageResult(existing.id, existing.recipient_count, exclusions)
        if exclusions:
            return page_queries.PageResult(None, 0, exclusions)
        return None

    async def _check_recovered(
        self, conn: AsyncConnection, campaign_id: int, page: Page, existing: batch_queries.BatchRow
    ) -> None:
        if (existing.first_position, existing.last_position, existing.segment) != (
            page.first,
            page.last,
            page.segment,
        ):
            raise VerificationFailed(
                "batch_recovery_conflict", batch_id=existing.id, page=page.page
            )
        rows = (await batch_queries.rows_per_batch(conn, campaign_id)).get(existing.id, 0)
        check_count(
            "batch_recovery_conflict",
            expected=existing.recipient_count,
            actual=rows,
            batch_id=existing.id,
        )

    async def _verify(self, conn: AsyncConnection, campaign_id: int, candidate_count: int) -> int:
        """SND-7, before `prepared_at`: ownership both ways first, then rows per batch, then
        candidates = recipients + exclusions. Returns the preparation exclusions."""
        await check_ownership(conn, campaign_id)
        stored = await batch_queries.list_for(conn, campaign_id)
        return await self._verify_counts(conn, campaign_id, candidate_count, stored)

    async def reverify(self, job: Job, send: SendRow) -> None:
        """A prepared send that resumes is verified again before anything is dispatched:
        the same checks, on the frozen batches, none of them created after `prepared_at`."""
        assert send.prepared_at is not None
        async with self._ctx.queue.fenced(job) as conn:
            await check_ownership(conn, send.campaign_id)
            stored = await batch_queries.list_for(conn, send.campaign_id)
            check_frozen(stored, send.prepared_at)
            await self._verify_counts(conn, send.campaign_id, send.candidate_count, stored)

    async def _verify_counts(
        self,
        conn: AsyncConnection,
        campaign_id: int,
        candidate_count: int | None,
        stored: list[batch_queries.BatchRow],
    ) -> int:
        rows = await batch_queries.rows_per_batch(conn, campaign_id)
        for batch in stored:
            check_count(
                "batch_recipient_count",
                expected=batch.recipient_count,
                actual=rows.get(batch.id, 0),
                batch_id=batch.id,
            )
        excluded = await batch_queries.preparation_exclusions(conn, campaign_id)
        recipient_total = sum(batch.recipient_count for batch in stored)
        check_count(
            "preparation_totals",
            expected=candidate_count,
            actual=recipient_total + excluded,
            count_check="candidate_total",
            candidate_count=candidate_count,
            preparation_excluded_count=excluded,
            recipient_count=recipient_total,
            actual_count=sum(rows.values()),
        )
        await check_ab_accounting(conn, campaign_id, candidate_count, excluded)
        return excluded
