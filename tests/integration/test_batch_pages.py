"""A page of candidates becomes at most one batch in one transaction (SND-4, SND-6): one
statement on PostgreSQL, the same writes step by step on SQLite, with the same result; and a
page whose commit reached the database though the preparation never heard back is taken as
written on the retry, never written twice."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, event, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection
from structlog.testing import capture_logs

from tests.factories import make_settings
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    recipient_states,
    registry,
    running,
    studio_with,
    wait_for_campaign_status,
)
from tidings.bootstrap import Container
from tidings.domain.sending import Page
from tidings.storage.sending import batch_pages, batches
from tidings.storage.tables import (
    campaign_batches,
    campaign_candidates,
    campaign_recipients,
    captured_messages,
    subscribers,
)

Studio = tuple[httpx.AsyncClient, Container, dict[str, str]]
READERS = 60


@pytest.fixture
async def studio(database_url: str) -> AsyncIterator[Studio]:
    settings = make_settings(database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 20})
    async with studio_with(settings, READERS) as found:
        yield found


async def _candidates(container: Container, campaign_id: int, subscriber_ids: range) -> None:
    """The campaign's candidate list as selection leaves it: position n for subscriber n."""
    async with container.db.write() as conn:
        await conn.execute(
            insert(campaign_candidates),
            [
                {"campaign_id": campaign_id, "position": n, "subscriber_id": n, "segment": "free"}
                for n in subscriber_ids
            ],
        )


async def _write(container: Container, campaign_id: int, page: Page) -> batch_pages.PageResult:
    async with container.db.write() as conn:
        return await batch_pages.create_page_batch(
            conn, campaign_id, page, now=container.sending.now()
        )


async def _stored(conn: AsyncConnection, campaign_id: int) -> tuple[list[Any], int]:
    batches = list(
        await conn.execute(
            select(campaign_batches.c.id, campaign_batches.c.recipient_count).where(
                campaign_batches.c.campaign_id == campaign_id
            )
        )
    )
    rows = (
        await conn.execute(
            select(func.count()).where(campaign_recipients.c.campaign_id == campaign_id)
        )
    ).scalar_one()
    return batches, int(rows)


async def test_a_page_becomes_one_batch_of_its_sendable_readers_and_exclusions_for_the_rest(
    studio: Studio,
) -> None:
    """Reader 3 has no usable address and reader 5 is gone since selection: the batch counts
    the 18 others, and both exclusions are stored and returned with their reasons."""
    client, container, headers = studio
    campaign_id = await create_campaign(client, headers)
    await _candidates(container, campaign_id, range(1, 21))
    async with container.db.write() as conn:
        await conn.execute(update(subscribers).where(subscribers.c.id == 3).values(email="x"))
        await conn.execute(delete(subscribers).where(subscribers.c.id == 5))
    page = Page(page=1, segment="free", first=1, last=20, domain="example.org")
    result = await _write(container, campaign_id, page)
    assert result.batch_id is not None
    assert result.recipient_count == 18
    assert result.exclusions == [(3, 3, "invalid_address"), (None, 5, "member_not_found")]
    async with container.db.read() as conn:
        assert await _stored(conn, campaign_id) == ([(result.batch_id, 18)], 20)
        batched = (
            await conn.execute(
                select(func.count()).where(
                    campaign_recipients.c.batch_id == result.batch_id,
                    campaign_recipients.c.state == "pending",
                )
            )
        ).scalar_one()
        assert batched == 18
        assert await batch_pages.page_exclusions(conn, campaign_id, page) == result.exclusions


async def test_a_page_with_nothing_sendable_leaves_exclusions_and_no_batch(
    studio: Studio,
) -> None:
    """Every reader of the page is gone: no batch row, one exclusion each, and what a retry
    would find (`page_exclusions`) is the same list."""
    client, container, headers = studio
    campaign_id = await create_campaign(client, headers)
    await _candidates(container, campaign_id, range(1, 4))
    async with container.db.write() as conn:
        await conn.execute(delete(subscribers).where(subscribers.c.id.in_([1, 2, 3])))
    page = Page(page=1, segment="free", first=1, last=3, domain="example.org")
    result = await _write(container, campaign_id, page)
    assert (result.batch_id, result.recipient_count) == (None, 0)
    assert result.exclusions == [(None, n, "member_not_found") for n in (1, 2, 3)]
    async with container.db.read() as conn:
        assert await _stored(conn, campaign_id) == ([], 3)
        assert await batch_pages.page_exclusions(conn, campaign_id, page) == result.exclusions


@pytest.mark.parametrize("nothing_sendable", [False, True], ids=["batch", "only-exclusions"])
async def test_a_page_committed_without_an_answer_is_taken_as_written_on_the_retry(
    database_url: str, nothing_sendable: bool
) -> None:
    """The first page's COMMIT reaches the database and then the answer is lost (the driver
    raises after it). The retry finds the page written — its batch, or only its exclusions —
    and writes nothing again: the preparation verifies, and every reader is mailed once."""
    settings = make_settings(
        database_url,
        queue=FAST_QUEUE,
        bulk_email={"batch_size": 20, "batch_creation_concurrency": 1},  # pages in order
    )
    async with studio_with(settings, READERS) as (client, container, headers):
        if nothing_sendable:
            # Each segment's first page is its 20 highest ids (21-60): no usable address.
            async with container.db.write() as conn:
                await conn.execute(
                    update(subscribers)
                    .where(subscribers.c.id > 20)
                    .values(email=func.replace(subscribers.c.email, "@", " at "))
                )
        lost: list[str] = []

        def note_page(conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            if "INSERT INTO campaign_recipients" in statement:
                conn.info["page"] = True

        def commit_then_lose_the_answer(conn: Any) -> None:
            if conn.info.pop("page", False) and not lost:
                conn.exec_driver_sql("COMMIT")
                lost.append("page")
                raise ConnectionError("the answer to COMMIT was lost")

        engine = container.db.engine.sync_engine
        event.listen(engine, "before_cursor_execute", note_page)
        event.listen(engine, "commit", commit_then_lose_the_answer)
        campaign_id = await create_campaign(client, headers)
        response = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        assert response.status_code == 202, response.text
        with capture_logs() as logs:
            async with running(container, registry(container)):
                assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        event.remove(engine, "commit", commit_then_lose_the_answer)
        assert lost == ["page"]
        assert [entry["page"] for entry in logs if entry["event"] == "campaign.page_retry"] == [1]
        expected = {"sent": 20, "excluded": 40} if nothing_sendable else {"sent": READERS}
        assert await recipient_states(container, campaign_id) == expected
        async with container.db.read() as conn:
            rows = list(await conn.execute(select(captured_messages.c.recipients)))
        mailed = [address for (recipients,) in rows for address in recipients]
        assert len(mailed) == len(set(mailed)) == expected["sent"]


async def test_an_unprepared_attempt_is_discarded_whole_batches_at_a_time(studio: Studio) -> None:
    """SND-8's start-over: each step removes whole batches, about `limit` recipients' worth
    and at least one, with their recipients; then the exclusions no batch holds; then reports
    0 with nothing of the attempt left. (Readers 3 and 25 are gone: pages of 19, 19 and 20.)"""
    client, container, headers = studio
    campaign_id = await create_campaign(client, headers)
    await _candidates(container, campaign_id, range(1, 61))
    async with container.db.write() as conn:
        await conn.execute(delete(subscribers).where(subscribers.c.id.in_([3, 25])))
    for number in (1, 2, 3):
        first = 20 * number - 19
        page = Page(page=number, segment="free", first=first, last=first + 19, domain="x.org")
        await _write(container, campaign_id, page)
    steps = []
    for _ in range(5):
        async with container.db.write() as conn:
            steps.append(await batches.discard_some(conn, campaign_id, limit=25))
    # 19 + 19 recipients and their 2 batches (the second starts before 25), then 20 and 1,
    # then the 2 exclusions.
    assert steps == [40, 21, 2, 0, 0]
    async with container.db.read() as conn:
        assert await _stored(conn, campaign_id) == ([], 0)
