"""Consent re-checked while a batch is being sent (AUD-4, SND-10): a reader who leaves after
the batch was claimed is excluded in the write that marks their chunk in flight, never mailed.
"""

from __future__ import annotations

from sqlalchemy import insert, select, update

from tests.factories import api_client
from tests.support.sending import (
    mailed_at_least,
    queued_send,
    recipient_states,
    sink_settings,
    wait_for,
    wait_for_campaign_status,
    workers,
)
from tidings.bootstrap import Container, utcnow
from tidings.devservers.sink import Faults, SmtpSink
from tidings.storage.tables import (
    campaign_recipients,
    subscribers,
    subscriptions,
    suppressions,
)

READERS = 100


async def _last_pending(container: Container, campaign_id: int) -> list[tuple[int, str]]:
    """(subscriber id, address) of the recipients still `pending`, the last to be sent first."""
    query = (
        select(subscribers.c.id, subscribers.c.email)
        .join(campaign_recipients, campaign_recipients.c.subscriber_id == subscribers.c.id)
        .where(
            campaign_recipients.c.campaign_id == campaign_id,
            campaign_recipients.c.state == "pending",
        )
        .order_by(campaign_recipients.c.position.desc())
    )
    async with container.db.read() as conn:
        return [(int(row.id), str(row.email)) for row in await conn.execute(query)]


async def _withdraw(container: Container, chosen: list[int]) -> None:
    """One reader unsubscribes, one is revived to unconfirmed by a public subscribe, one is
    suppressed (a complaint) — each half of the consent rule, and the suppression list."""
    unsubscribed, revived, suppressed = chosen
    now = container.sending.now()
    async with container.db.write() as conn:
        await conn.execute(
            update(subscriptions)
            .where(subscriptions.c.subscriber_id == unsubscribed)
            .values(unsubscribed_at=now, unsubscribe_count=1, last_unsubscribed_at=now)
        )
        await conn.execute(
            update(subscriptions)
            .where(subscriptions.c.subscriber_id == revived)
            .values(confirmed_at=None)
        )
        email_hash = (
            await conn.execute(
                select(subscribers.c.email_hash).where(subscribers.c.id == suppressed)
            )
        ).scalar_one()
        await conn.execute(
            insert(suppressions).values(
                email_hash=email_hash, reason="complaint", created_by="test", created_at=now
            )
        )


async def test_consent_withdrawn_while_a_batch_sends_is_excluded_not_mailed(
    database_url: str,
) -> None:
    """A reader who unsubscribes, is suppressed or goes back to unconfirmed after the first
    messages of their batch went out must not be mailed: the batch was claimed with them
    mailable, and only the re-check as their chunk is marked in flight can stop it."""
    faults = Faults(delay_seconds=0.03, delay_commands=frozenset({"DATA"}))
    async with SmtpSink(clock=utcnow, port=0, faults=faults) as sink:
        settings = sink_settings(
            database_url, sink, bulk_email={"in_flight_chunk": 5, "submission_concurrency": 2}
        )
        async with api_client(settings) as (client, container):
            campaign_id = await queued_send(client, container, READERS)
            async with workers(container):
                await wait_for(lambda: mailed_at_least(sink, 10))
                chosen = (await _last_pending(container, campaign_id))[:3]
                assert len(chosen) == 3, "the send finished before consent could change"
                await _withdraw(container, [subscriber_id for subscriber_id, _ in chosen])
                assert await wait_for_campaign_status(container, campaign_id) == "submitted"
            states = await recipient_states(container, campaign_id)
            async with container.db.read() as conn:
                reasons = (
                    await conn.execute(
                        select(campaign_recipients.c.subscriber_id, campaign_recipients.c.reason)
                        .where(campaign_recipients.c.state == "excluded")
                        .order_by(campaign_recipients.c.subscriber_id)
                    )
                ).all()
            send = await container.sends.get_send(campaign_id)
    mailed = {address for message in sink.messages for address in message.recipients}
    assert not {address for _, address in chosen} & mailed
    assert states == {"sent": READERS - 3, "excluded": 3}
    assert sorted(reasons) == sorted((sid, "consent_withdrawn") for sid, _ in chosen)
    assert len(sink.messages) == READERS - 3
    assert send is not None
    assert (send.email_count, send.excluded_count) == (READERS - 3, 3)
