"""The verification checks that remained (bulk-email-service, "Recipient preparation"): a
prepared send is verified again when it resumes, batches created after `prepared_at` fail it,
ownership is reported both ways, and the database itself refuses an impossible total."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from structlog.testing import capture_logs

from tests.factories import make_settings
from tests.support.sending import (
    FAST_QUEUE,
    prepared_send,
    registry,
    running,
    studio_with,
    wait_for_campaign_status,
)
from tidings.bootstrap import Container
from tidings.campaigns.jobs.payloads import SEND_CAMPAIGN
from tidings.campaigns.verification import check_ownership
from tidings.domain.sending import VerificationFailed
from tidings.storage.tables import (
    campaign_batches,
    campaign_recipients,
    campaign_sends,
    captured_messages,
    jobs,
)

Studio = tuple[httpx.AsyncClient, Container, dict[str, str]]


@pytest.fixture
async def studio(database_url: str) -> AsyncIterator[Studio]:
    settings = make_settings(database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 20})
    async with studio_with(settings, 60) as found:
        yield found


async def _prepared(studio: Studio) -> int:
    """A campaign sent and prepared (its batches queued, none run yet)."""
    return await prepared_send(*studio)


async def test_a_resumed_send_with_a_batch_created_after_preparation_stops_before_dispatch(
    studio: Studio,
) -> None:
    """Once `prepared_at` is saved the batch set is frozen (SND-8): a resumed send finding a
    batch created later must stop with a verification failure before any batch is sent,
    not dispatch a set nobody verified."""
    _client, container, _headers = studio
    campaign_id = await _prepared(studio)
    async with container.db.write() as conn:
        prepared_at = (
            await conn.execute(
                select(campaign_sends.c.prepared_at).where(
                    campaign_sends.c.campaign_id == campaign_id
                )
            )
        ).scalar_one()
        late = (
            await conn.execute(
                select(func.max(campaign_batches.c.id)).where(
                    campaign_batches.c.campaign_id == campaign_id
                )
            )
        ).scalar_one()
        await conn.execute(
            update(campaign_batches)
            .where(campaign_batches.c.id == late)
            .values(created_at=prepared_at + timedelta(seconds=5))
        )
        send_job = (
            await conn.execute(select(jobs.c.id).where(jobs.c.kind == SEND_CAMPAIGN))
        ).scalar_one()
    await container.queue.replay(send_job)  # the send resumes (a sweep or an operator)
    with capture_logs() as logs:
        async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
            assert await wait_for_campaign_status(container, campaign_id) == "failed"
    send = await container.sends.get_send(campaign_id)
    assert send is not None
    assert (send.error_code, send.retryable) == ("recipient_verification_failed", False)
    (event,) = [e for e in logs if e["event"] == "email.verification.failed"]
    assert (event["reason"], event["batch_id"], event["late_batch_ids"]) == (
        "batch_created_after_preparation",
        late,
        [late],
    )
    async with container.db.read() as conn:
        mailed = (await conn.execute(select(func.count()).select_from(captured_messages))).scalar()
    assert mailed == 0


async def test_a_resumed_send_whose_rows_no_longer_match_stops_before_dispatch(
    studio: Studio,
) -> None:
    """A frozen preparation is re-verified on resume: a batch that lost a row since is
    reported (`batch_recipient_count`) and nothing more is dispatched."""
    _client, container, _headers = studio
    campaign_id = await _prepared(studio)
    async with container.db.write() as conn:
        victim = (await conn.execute(select(func.max(campaign_recipients.c.id)))).scalar_one()
        await conn.execute(campaign_recipients.delete().where(campaign_recipients.c.id == victim))
        send_job = (
            await conn.execute(select(jobs.c.id).where(jobs.c.kind == SEND_CAMPAIGN))
        ).scalar_one()
    await container.queue.replay(send_job)
    with capture_logs() as logs:
        async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
            assert await wait_for_campaign_status(container, campaign_id) == "failed"
    (event,) = [e for e in logs if e["event"] == "email.recipient_count.mismatch"]
    assert (event["reason"], event["actual"]) == ("batch_recipient_count", event["expected"] - 1)


async def test_cross_campaign_rows_are_reported_in_both_directions(studio: Studio) -> None:
    """A row of one campaign moved into another's batch is a failure for both campaigns,
    and each report says which way: rows of ours elsewhere, or rows of theirs in ours."""
    _client, container, _headers = studio
    first = await _prepared(studio)
    second = await _prepared(studio)
    async with container.db.write() as conn:
        theirs = (
            await conn.execute(
                select(func.min(campaign_batches.c.id)).where(
                    campaign_batches.c.campaign_id == second
                )
            )
        ).scalar_one()
        moved = (
            await conn.execute(
                select(func.min(campaign_recipients.c.id)).where(
                    campaign_recipients.c.campaign_id == first
                )
            )
        ).scalar_one()
        await conn.execute(
            update(campaign_recipients)
            .where(campaign_recipients.c.id == moved)
            .values(batch_id=theirs)
        )
    async with container.db.read() as conn:
        for campaign_id, facts in (
            (first, {"rows_in_other_batches": 1, "foreign_rows": 0}),
            (second, {"rows_in_other_batches": 0, "foreign_rows": 1}),
        ):
            with pytest.raises(VerificationFailed) as raised:
                await check_ownership(conn, campaign_id)
            assert raised.value.reason == "cross_email_recipient"
            assert raised.value.facts == facts


async def test_the_database_refuses_counts_beyond_the_recipients_they_count(
    studio: Studio,
) -> None:
    """No code path may write an impossible total (newsletter-backend §4.2): a batch's
    settled counts above its recipient count, or a send's totals above its candidates, are
    refused by the database itself, on both dialects."""
    _client, container, _headers = studio
    campaign_id = await _prepared(studio)
    async with container.db.read() as conn:
        batch_id, recipient_count = (
            await conn.execute(
                select(campaign_batches.c.id, campaign_batches.c.recipient_count)
                .where(campaign_batches.c.campaign_id == campaign_id)
                .limit(1)
            )
        ).one()
    with pytest.raises(IntegrityError):
        async with container.db.write() as conn:
            await conn.execute(
                update(campaign_batches)
                .where(campaign_batches.c.id == batch_id)
                .values(submitted_count=recipient_count, failed_count=1)
            )
    with pytest.raises(IntegrityError):
        async with container.db.write() as conn:
            await conn.execute(
                update(campaign_sends)
                .where(campaign_sends.c.campaign_id == campaign_id)
                .values(email_count=60, excluded_count=1)
            )
    async with container.db.write() as conn:  # a possible total is accepted
        await conn.execute(
            update(campaign_batches)
            .where(campaign_batches.c.id == batch_id)
            .values(submitted_count=recipient_count - 1, failed_count=1)
        )
