"""The webhook handler's writes are fenced by its job claim (DLV-2): a worker that stalled on a
slow receiver past its lease, while another worker reclaimed the job, writes nothing late."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import update

from tests.e2e.test_delivery_engine import Receiver
from tests.factories import make_settings
from tests.support.waiting import wait_for
from tidings.bootstrap import running
from tidings.domain.jobs import ClaimLost, GiveUp
from tidings.outbound.webhooks import DELIVER_WEBHOOK, WebhookJobHandler
from tidings.queue import rounds
from tidings.storage import webhooks as webhook_queries
from tidings.storage.tables import jobs


@pytest.mark.parametrize("receiver_status", [200, 410])
async def test_a_stalled_webhook_worker_writes_nothing_after_its_job_is_reclaimed(
    database_url: str, receiver_status: int
) -> None:
    """Two workers must never both record one delivery: the one whose lease ran out while the
    receiver stalled may not log the attempt nor disable the endpoint after another took over."""
    settings = make_settings(database_url, webhooks={"allow_private_networks": True})
    async with (
        Receiver(delay_seconds=1.0) as receiver,
        running(settings, apply_migrations=True) as container,
    ):
        receiver.status = receiver_status
        endpoint = await container.webhooks.create_endpoint(receiver.url, ["*"])
        delivery = await container.webhooks.send_test(endpoint.id)
        now = container.clock()
        async with container.db.write() as conn:
            (job,) = await rounds.claim(
                conn, kinds=[DELIVER_WEBHOOK], limit=1, now=now, lease=timedelta(seconds=30)
            )
        handler = WebhookJobHandler(container.queue, container.webhook_client, container.clock)
        attempt = asyncio.create_task(handler(job))
        # The request is out and the receiver is stalling (or the handler failed early).
        await wait_for(lambda: asyncio.sleep(0, result=bool(receiver.requests) or attempt.done()))
        async with container.db.write() as conn:  # the lease lapsed; another worker took it
            await conn.execute(
                update(jobs)
                .where(jobs.c.id == job.id)
                .values(claim_token="f" * 32, locked_until=now + timedelta(minutes=5))
            )
        with pytest.raises(ClaimLost):
            await attempt
        async with container.db.read() as conn:
            stored = await webhook_queries.get_delivery(conn, delivery.id)
            current = await webhook_queries.get_endpoint(conn, endpoint.id)
        assert stored is not None
        assert current is not None
        assert (stored.status, stored.attempts, stored.last_status_code) == ("pending", 0, None)
        assert current.enabled
        assert current.disabled_reason is None


async def test_a_webhook_worker_holding_its_claim_records_the_410_and_disables(
    database_url: str,
) -> None:
    """The fence must not stop the rightful worker: with its claim held, the attempt is logged
    and the endpoint that answered 410 Gone is disabled, in one transaction."""
    settings = make_settings(database_url, webhooks={"allow_private_networks": True})
    async with Receiver() as receiver, running(settings, apply_migrations=True) as container:
        receiver.status = 410
        endpoint = await container.webhooks.create_endpoint(receiver.url, ["*"])
        delivery = await container.webhooks.send_test(endpoint.id)
        async with container.db.write() as conn:
            (job,) = await rounds.claim(
                conn,
                kinds=[DELIVER_WEBHOOK],
                limit=1,
                now=container.clock(),
                lease=timedelta(seconds=30),
            )
        handler = WebhookJobHandler(container.queue, container.webhook_client, container.clock)
        with pytest.raises(GiveUp):
            await handler(job)
        async with container.db.read() as conn:
            stored = await webhook_queries.get_delivery(conn, delivery.id)
            current = await webhook_queries.get_endpoint(conn, endpoint.id)
        assert stored is not None
        assert current is not None
        assert (stored.status, stored.attempts, stored.last_status_code) == ("gone", 1, 410)
        assert not current.enabled
