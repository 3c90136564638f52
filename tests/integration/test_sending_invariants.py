"""The sending invariants of SPEC §13, on both dialects: frozen recipient sets, no rescans,
consent re-checked at send time, one recipient's failure contained, fenced claims."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import event, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.sending import (
    FAST_QUEUE,
    RaisingProvider,
    create_campaign,
    recipient_states,
    registry,
    running,
    seed,
    wait_for_campaign_status,
    wait_for_send_status,
)
from tidings.bootstrap import Container
from tidings.campaigns.jobs.payloads import SEND_CAMPAIGN, SendCampaign
from tidings.domain.jobs import ClaimLost
from tidings.domain.sending import RecipientState
from tidings.outbound.capture import CaptureProvider
from tidings.storage.sending import batch_claims as claim_queries
from tidings.storage.tables import (
    campaign_batches,
    campaign_recipients,
    captured_messages,
    jobs,
    subscribers,
    subscriptions,
    suppressions,
)

Studio = tuple[httpx.AsyncClient, Container, dict[str, str]]


@pytest.fixture
async def studio(database_url: str) -> AsyncIterator[Studio]:
    settings = make_settings(database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 20})
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 60)
        yield client, container, headers


async def _send(client: httpx.AsyncClient, headers: dict[str, str], campaign_id: int) -> None:
    response = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
    assert response.status_code == 202, response.text


def _count_selections(container: Container) -> list[str]:
    """Record every statement that selects the audience into the candidate list."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "INSERT INTO campaign_candidates" in statement:
            seen.append(statement)

    event.listen(container.db.engine.sync_engine, "before_cursor_execute", record)
    return seen


async def _captured_recipients(container: Container) -> Counter[str]:
    async with container.db.read() as conn:
        rows = await conn.execute(select(captured_messages.c.recipients))
        return Counter(address for (recipients,) in rows for address in recipients)


async def test_unique_recipient_rejects_a_duplicate_and_accepts_two_campaigns(
    studio: Studio,
) -> None:
    """One row per (campaign, subscriber) is the resume strategy; the same reader in two
    campaigns must still be possible, or nobody could ever get a second issue."""
    client, container, headers = studio
    first = await create_campaign(client, headers)
    second = await create_campaign(client, headers, subject="Issue 2")
    now = container.sending.now()
    async with container.db.write() as conn:
        subscriber_id = (await conn.execute(select(func.min(subscribers.c.id)))).scalar_one()
        row = {
            "subscriber_id": subscriber_id,
            "position": 1,
            "state": "excluded",
            "updated_at": now,
        }
        await conn.execute(insert(campaign_recipients).values(campaign_id=first, **row))
        await conn.execute(insert(campaign_recipients).values(campaign_id=second, **row))
    with pytest.raises(IntegrityError):
        async with container.db.write() as conn:
            await conn.execute(insert(campaign_recipients).values(campaign_id=first, **row))


async def test_competing_send_jobs_prepare_once_and_mail_each_reader_once(
    studio: Studio,
) -> None:
    """Two send jobs for one campaign (a retry racing the original) must not build two
    recipient sets: the status lock makes the loser a no-op."""
    client, container, headers = studio
    campaign_id = await create_campaign(client, headers)
    selections = _count_selections(container)
    await _send(client, headers, campaign_id)
    async with container.db.write() as conn:  # a competing job for the same attempt
        step = SendCampaign(campaign_id, 1)
        await container.queue.enqueue(conn, SEND_CAMPAIGN, "competing", step.to_payload())
    async with running(container, registry(container, send_concurrency=2)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    assert len(selections) == 1
    assert await recipient_states(container, campaign_id) == {"sent": 60}
    assert set((await _captured_recipients(container)).values()) == {1}


async def test_resume_reuses_the_frozen_recipients_without_selecting_again(
    studio: Studio,
) -> None:
    """After `prepared_at` the audience is frozen: a resumed send neither rescans it nor adds
    people who subscribed since (SND-8)."""
    client, container, headers = studio
    campaign_id = await create_campaign(client, headers)
    await _send(client, headers, campaign_id)
    async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
        await wait_for_send_status(container, campaign_id, "submitting")
    await seed(container, "weekly", 15)  # newcomers after preparation
    selections = _count_selections(container)
    (job,) = await container.queue.list_jobs(kind=SEND_CAMPAIGN)
    await container.queue.replay(job.id)  # the resume: the same handler, again
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    assert selections == []
    assert await recipient_states(container, campaign_id) == {"sent": 60}
    assert sum((await _captured_recipients(container)).values()) == 60


async def test_consent_withdrawn_after_selection_is_excluded_not_mailed(studio: Studio) -> None:
    """Someone who unsubscribes, is suppressed, or whose subscription was revived to pending
    after selection must not be mailed (both halves of AUD-4, re-checked at send time)."""
    client, container, headers = studio
    campaign_id = await create_campaign(client, headers)
    await _send(client, headers, campaign_id)
    async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
        await wait_for_send_status(container, campaign_id, "submitting")
    now = container.sending.now()
    async with container.db.write() as conn:
        ids = list(
            (await conn.execute(select(subscribers.c.id).order_by(subscribers.c.id))).scalars()
        )
        await conn.execute(
            update(subscriptions)
            .where(subscriptions.c.subscriber_id == ids[0])
            .values(unsubscribed_at=now, unsubscribe_count=1, last_unsubscribed_at=now)
        )
        await conn.execute(  # revived by a public subscribe: pending again
            update(subscriptions)
            .where(subscriptions.c.subscriber_id == ids[1])
            .values(confirmed_at=None)
        )
        email_hash = (
            await conn.execute(select(subscribers.c.email_hash).where(subscribers.c.id == ids[2]))
        ).scalar_one()
        await conn.execute(
            insert(suppressions).values(
                email_hash=email_hash, reason="complaint", created_by="test", created_at=now
            )
        )
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    assert await recipient_states(container, campaign_id) == {"sent": 57, "excluded": 3}
    async with container.db.read() as conn:
        reasons = set(
            (
                await conn.execute(
                    select(campaign_recipients.c.reason).where(
                        campaign_recipients.c.state == "excluded"
                    )
                )
            ).scalars()
        )
    assert reasons == {"consent_withdrawn"}
    mailed = await _captured_recipients(container)
    assert not {"reader-1@example.test", "reader-2@example.test", "reader-3@example.test"} & set(
        mailed
    )
    send = await container.sends.get_send(campaign_id)
    assert send is not None
    assert (send.email_count, send.excluded_count) == (57, 3)


class ProviderMeltdown(BaseException):
    """Not an `Exception`: what a provider raising "anything" may raise (SND-12)."""


@pytest.mark.parametrize(
    "error", [ZeroDivisionError("boom"), KeyError("x"), RuntimeError(), ProviderMeltdown()]
)
async def test_a_provider_exception_for_one_recipient_is_recorded_and_the_batch_goes_on(
    studio: Studio, error: BaseException
) -> None:
    """Provider code raising anything for one recipient — any `BaseException` but a
    cancellation — must not abort the batch or undo the others (SND-12): that one is failed
    with the exception's class and a log line, the rest are sent."""
    from structlog.testing import capture_logs

    client, container, headers = studio
    campaign_id = await create_campaign(client, headers)
    await _send(client, headers, campaign_id)
    provider = RaisingProvider(
        CaptureProvider(container.db, container.sending.now), {"reader-7@example.test"}, error
    )
    with capture_logs() as logs:
        async with running(container, registry(container, provider=provider)):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    errors = [log for log in logs if log["event"] == "email.provider_error"]
    assert [log["error_type"] for log in errors] == [type(error).__name__]
    assert await recipient_states(container, campaign_id) == {"sent": 59, "failed": 1}
    async with container.db.read() as conn:
        reason = (
            await conn.execute(
                select(campaign_recipients.c.reason).where(campaign_recipients.c.state == "failed")
            )
        ).scalar_one()
    assert reason == f"provider_error_{type(error).__name__}"
    assert provider.calls.count("reader-7@example.test") == 1  # not retried as if transient


async def _claimed_batch(container: Container, campaign_id: int) -> tuple[int, Any]:
    """A prepared campaign's first page (a full batch of 20) and a running job holding it."""
    async with container.db.read() as conn:
        batch_id = (
            await conn.execute(
                select(campaign_batches.c.id).where(
                    campaign_batches.c.campaign_id == campaign_id, campaign_batches.c.page == 1
                )
            )
        ).scalar_one()
    async with container.db.write() as conn:
        await container.queue.enqueue(conn, "probe", f"probe-{batch_id}", {})
    from tidings.queue import rounds

    async with container.db.write() as conn:
        (job,) = await rounds.claim(
            conn,
            kinds=["probe"],
            limit=1,
            now=container.sending.now(),
            lease=timedelta(seconds=30),
        )
    return int(batch_id), job


async def test_a_stale_batch_claim_is_taken_over_and_a_fresh_one_left_alone(
    studio: Studio,
) -> None:
    """A live worker's batch must not be stolen; a dead worker's batch must be resumed, its
    in-flight recipients becoming `uncertain` (never resent automatically, SND-13)."""
    client, container, headers = studio
    campaign_id = await create_campaign(client, headers)
    await _send(client, headers, campaign_id)
    async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
        await wait_for_send_status(container, campaign_id, "submitting")
    batch_id, holder = await _claimed_batch(container, campaign_id)
    now = container.sending.now()
    async with container.db.write() as conn:
        assert await claim_queries.claim(conn, batch_id, token=holder.claim_token, now=now) == (
            "claimed",
            None,
        )
        await claim_queries.move(
            conn,
            batch_id,
            token=holder.claim_token,
            now=now,
            ids=None,
            from_states=[RecipientState.PENDING],
            to_state=RecipientState.SENDING,
        )
        outcome = await claim_queries.claim(conn, batch_id, token="b" * 32, now=now)
    assert outcome == ("held", None)
    async with container.db.write() as conn:  # the holder's worker dies: its lease lapses
        await conn.execute(
            update(jobs).where(jobs.c.id == holder.id).values(locked_until=now - timedelta(1))
        )
        outcome = await claim_queries.claim(conn, batch_id, token="b" * 32, now=now)
        assert outcome == ("taken_over", holder.claim_token)
        moved = await claim_queries.move(
            conn,
            batch_id,
            token="b" * 32,
            now=now,
            from_states=[RecipientState.SENDING],
            to_state=RecipientState.UNCERTAIN,
        )
    assert moved == 20


async def test_a_late_worker_can_write_nothing_after_its_claim_is_reclaimed(
    studio: Studio,
) -> None:
    """DLV-2's fencing token applied to the handler's own writes: once another worker holds
    the job, the first one's recipient and batch writes are refused."""
    client, container, headers = studio
    campaign_id = await create_campaign(client, headers)
    await _send(client, headers, campaign_id)
    async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
        await wait_for_send_status(container, campaign_id, "submitting")
    batch_id, late = await _claimed_batch(container, campaign_id)
    now = container.sending.now()
    async with container.queue.fenced(late) as conn:
        await claim_queries.claim(conn, batch_id, token=late.claim_token, now=now)
    async with container.db.write() as conn:  # lease lapsed; another worker reclaims the job
        await conn.execute(
            update(jobs)
            .where(jobs.c.id == late.id)
            .values(claim_token="c" * 32, locked_until=now + timedelta(minutes=1))
        )
    with pytest.raises(ClaimLost):
        async with container.queue.fenced(late) as conn:
            await claim_queries.move(
                conn,
                batch_id,
                token=late.claim_token,
                now=now,
                from_states=[RecipientState.PENDING],
                to_state=RecipientState.SENT,
            )
    async with container.db.write() as conn:  # even outside the fence: the batch token
        moved = await claim_queries.move(
            conn,
            batch_id,
            token="c" * 32,
            now=now,
            from_states=[RecipientState.PENDING],
            to_state=RecipientState.SENT,
        )
    assert moved == 0
    assert (await recipient_states(container, campaign_id))["pending"] == 60


async def test_a_tampered_batch_fails_the_campaign_terminally_with_the_reason(
    studio: Studio,
) -> None:
    """Counts are verified against rows, never trusted (PRI-1): a batch missing a recipient
    row stops the send with a distinct, non-retryable verification error (SND-15)."""
    client, container, headers = studio
    campaign_id = await create_campaign(client, headers)
    await _send(client, headers, campaign_id)
    async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
        await wait_for_send_status(container, campaign_id, "submitting")
    async with container.db.write() as conn:
        victim = (await conn.execute(select(func.max(campaign_recipients.c.id)))).scalar_one()
        await conn.execute(campaign_recipients.delete().where(campaign_recipients.c.id == victim))
    from structlog.testing import capture_logs

    with capture_logs() as logs:
        async with running(container, registry(container)):
            assert await wait_for_campaign_status(container, campaign_id) == "failed"
    send = await container.sends.get_send(campaign_id)
    assert send is not None
    assert send.error_code == "recipient_verification_failed"
    assert send.retryable is False
    mismatch = [e for e in logs if e["event"] == "email.recipient_count.mismatch"]
    assert mismatch
    assert mismatch[0]["reason"] == "batch_recipient_read"
    expected, actual = mismatch[0]["expected"], mismatch[0]["actual"]
    assert expected in (10, 20)  # whichever page held the removed row
    assert actual == expected - 1
    assert mismatch[0]["log_level"] == "error"


async def test_scheduled_send_starts_at_its_time_and_a_cancelled_one_never(
    studio: Studio,
) -> None:
    """A schedule is a durable job due at its time (not a polling loop); cancelling before
    then means its job finds nothing to do."""
    client, container, headers = studio
    at = (container.sending.now() + timedelta(minutes=5)).isoformat()
    kept = await create_campaign(client, headers)
    dropped = await create_campaign(client, headers, subject="Dropped")
    for campaign_id in (kept, dropped):
        response = await client.post(
            f"/api/admin/campaigns/{campaign_id}/schedule",
            json={"scheduled_at": at},
            headers=headers,
        )
        assert response.status_code == 202, response.text
    cancel = await client.post(f"/api/admin/campaigns/{dropped}/cancel", headers=headers)
    assert cancel.status_code == 200
    assert cancel.json()["status"] == "cancelled"
    send_jobs = await container.queue.list_jobs(kind=SEND_CAMPAIGN)
    assert {job.run_at.isoformat() for job in send_jobs} == {at}
    async with container.db.write() as conn:  # time passes
        await conn.execute(update(jobs).values(run_at=container.sending.now()))
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, kept) == "submitted"
        await asyncio.sleep(0.3)
    assert (await container.campaigns.get(dropped)).campaign.status == "cancelled"
    assert sum((await _captured_recipients(container)).values()) == 60


async def test_only_page_commits_skip_the_disk_flush_and_prepared_at_waits_for_it(
    studio: Studio,
) -> None:
    """Page transactions commit without waiting for the WAL flush (PostgreSQL), which is safe
    only because the commit recording `prepared_at` does wait, carrying every page with it.
    If the setting leaked beyond a page's own transaction, that commit (and any subscriber's
    consent written on the same pooled connection) could vanish in a crash."""
    client, container, headers = studio
    if container.db.dialect != "postgresql":
        pytest.skip("synchronous_commit is PostgreSQL's; SQLite has one writer and no WAL flag")
    seen: list[tuple[str, str]] = []

    def note(conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "INSERT INTO campaign_batches" in statement:  # one statement a page on PostgreSQL
            conn.info["kind"] = "page"
        elif statement.startswith("UPDATE campaign_sends") and "prepared_at" in statement:
            conn.info["kind"] = "prepared_at"

    def at_commit(conn: Any) -> None:
        kind = conn.info.pop("kind", None)
        if kind is not None:
            value = conn.exec_driver_sql("SHOW synchronous_commit").scalar_one()
            seen.append((kind, value))

    engine = container.db.engine.sync_engine
    event.listen(engine, "before_cursor_execute", note)
    event.listen(engine, "commit", at_commit)
    campaign_id = await create_campaign(client, headers)
    await _send(client, headers, campaign_id)
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    pages = [value for kind, value in seen if kind == "page"]
    assert len(pages) >= 3  # 60 readers in pages of 20, per segment
    assert set(pages) == {"off"}
    assert [value for kind, value in seen if kind == "prepared_at"] == ["on"]


class MeltingBatchProvider:
    """A batch provider (the world outside) whose call raises a non-`Exception`."""

    name = "melting"
    max_batch_size = 1000

    async def send_batch(self, batch: Any) -> Any:
        raise ProviderMeltdown()

    async def close(self) -> None:
        return None


async def test_a_batch_provider_raising_anything_leaves_its_batch_recorded_not_to_the_lease(
    studio: Studio,
) -> None:
    """A batch call that raised something that is not even an `Exception` may still have
    reached the provider: the batch is recorded at once — readers `uncertain`, the batch
    awaiting a reconcile with its error, a log line — instead of sitting `submitting` with
    nothing written until its lease lapses."""
    from structlog.testing import capture_logs

    from tidings.campaigns.jobs.finalise_campaign import FinaliseCampaignHandler
    from tidings.campaigns.jobs.payloads import FINALISE_CAMPAIGN, SEND_BATCH
    from tidings.campaigns.jobs.send_batch import SendBatchHandler
    from tidings.campaigns.jobs.send_campaign import SendCampaignHandler
    from tidings.campaigns.submit.per_batch import PerBatchSubmit
    from tidings.queue.policy import HandlerRegistry

    client, container, headers = studio
    campaign_id = await create_campaign(client, headers)
    await _send(client, headers, campaign_id)
    strategy = PerBatchSubmit(lambda _domain: MeltingBatchProvider(), deadline_seconds=5)
    handlers = HandlerRegistry()
    handlers.register(SEND_CAMPAIGN, SendCampaignHandler(container.sending), renew_lease=True)
    handlers.register(SEND_BATCH, SendBatchHandler(container.sending, strategy), renew_lease=True)
    handlers.register(
        FINALISE_CAMPAIGN, FinaliseCampaignHandler(container.sending), renew_lease=True
    )
    with capture_logs() as logs:
        async with running(container, handlers):
            assert await wait_for_campaign_status(container, campaign_id) == "failed"
    assert await recipient_states(container, campaign_id) == {"uncertain": 60}
    send = await container.sends.get_send(campaign_id)
    assert send is not None
    assert send.error_code == "batch_outcome_uncertain"
    async with container.db.read() as conn:
        batches = (
            await conn.execute(
                select(campaign_batches.c.status, campaign_batches.c.error_code).where(
                    campaign_batches.c.campaign_id == campaign_id
                )
            )
        ).all()
    assert {tuple(batch) for batch in batches} == {("submitting", "outcome_uncertain")}
    lines = [log for log in logs if log["event"] == "campaign.batch_uncertain"]
    assert {log["error_type"] for log in lines} == {"ProviderMeltdown"}
