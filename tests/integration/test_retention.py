"""Captured mail and the webhook delivery log are pruned after their retention: both hold
personal data (addresses, message bodies, event payloads)."""

from datetime import timedelta

from tests.support.clock import Clock
from tests.support.queue_policy import policy
from tidings.delivery.provider import Envelope
from tidings.outbound.capture import CapturedMail, CaptureProvider
from tidings.outbound.webhooks import Webhooks
from tidings.queue.service import JobQueue
from tidings.storage import webhooks as webhook_queries
from tidings.storage.database import Database


async def test_captured_mail_older_than_retention_is_pruned(db: Database) -> None:
    """Captured mail holds addresses and content: it must not be kept forever."""
    clock = Clock()
    provider = CaptureProvider(db, clock)
    mail = CapturedMail(db, clock, retention=timedelta(days=30))
    envelope = Envelope(
        sender="a@example.org",
        recipients=["b@example.org"],
        data=b"Subject: hi\r\n\r\nbody",
        message_id="<m@example.org>",
    )
    await provider.send(envelope)
    clock.now += timedelta(days=31)
    await provider.send(envelope)
    assert await mail.prune() == 1
    (kept,) = await mail.list()
    assert kept.captured_at == clock.now


async def test_finished_webhook_deliveries_are_pruned_pending_ones_kept(db: Database) -> None:
    """Delivery payloads hold personal data; pending ones are still owed to their receiver."""
    clock = Clock()
    queue = JobQueue(db, policy(), clock)
    hooks = Webhooks(db, queue, clock, rotation_overlap=timedelta(hours=1))
    endpoint = await hooks.create_endpoint("https://hooks.example.org/x", ["*"])
    first = await hooks.send_test(endpoint.id)
    second = await hooks.send_test(endpoint.id)
    async with db.write() as conn:
        await webhook_queries.record_attempt(
            conn,
            first.id,
            status="delivered",
            status_code=200,
            error=None,
            response_excerpt="ok",
            now=clock.now,
        )
    clock.now += timedelta(days=8)
    assert await hooks.prune_deliveries(older_than=timedelta(days=7)) == 1
    remaining = await hooks.list_deliveries(endpoint.id, before_id=None, limit=10)
    assert [d.id for d in remaining] == [second.id]
