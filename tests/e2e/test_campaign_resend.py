"""Resending to uncertain or transiently failed readers (SND-13): the operator's explicit,
audited choice, which sends to exactly those readers — never to anyone sent, excluded or
permanently refused — in a new attempt of the finished send."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from tests.factories import make_settings
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    recipient_states,
    registry,
    running,
    studio_with,
    wait_for_campaign_status,
    wait_for_send_status,
)
from tidings.bootstrap import Container
from tidings.campaigns.jobs.payloads import SEND_CAMPAIGN
from tidings.delivery.provider import PermanentFailure
from tidings.outbound.capture import CaptureProvider
from tidings.storage.sending import interventions
from tidings.storage.tables import campaign_recipients, captured_messages, subscribers

Studio = tuple[httpx.AsyncClient, Container, dict[str, str]]


class TroubledProvider:
    """The world outside: chosen addresses meet a chosen failure (a timeout leaves the
    reader uncertain), the rest are captured by the real capture provider."""

    name = "troubled"

    def __init__(self, inner: CaptureProvider, failures: dict[str, BaseException]) -> None:
        self._inner = inner
        self.failures = failures

    async def send(self, envelope: Any) -> Any:
        failure = self.failures.get(envelope.recipients[0])
        if failure is not None:
            raise failure
        return await self._inner.send(envelope)

    async def close(self) -> None:
        return None


async def _deferred_by_a_batch_provider(container: Container, address: str) -> None:
    """The reader as a batch provider's per-recipient 4xx leaves it: `failed`, with a
    transient code (an SMTP deferral goes back to `pending` instead, PRV-1)."""
    async with container.db.write() as conn:
        subscriber_id = (
            await conn.execute(select(subscribers.c.id).where(subscribers.c.email == address))
        ).scalar_one()
        await conn.execute(
            update(campaign_recipients)
            .where(campaign_recipients.c.subscriber_id == subscriber_id)
            .values(state="failed", reason="mailgun_deferred_421")
        )


@pytest.fixture
async def studio(database_url: str) -> AsyncIterator[Studio]:
    settings = make_settings(database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 20})
    async with studio_with(settings, 60) as found:
        yield found


async def _captured(container: Container) -> Counter[str]:
    async with container.db.read() as conn:
        rows = await conn.execute(select(captured_messages.c.recipients))
        return Counter(address for (recipients,) in rows for address in recipients)


async def test_resend_reaches_the_uncertain_then_the_deferred_and_never_anyone_else(
    studio: Studio,
) -> None:
    """Each resend mails exactly the readers of the chosen state: sent readers get no second
    copy and a permanent refusal is never tried again, however often an admin resends."""
    client, container, headers = studio
    provider = TroubledProvider(
        CaptureProvider(container.db, container.clock),
        {
            "reader-1@example.test": TimeoutError(),
            "reader-4@example.test": PermanentFailure(status=550),
        },
    )
    handlers = registry(container, provider=provider)
    campaign_id = await create_campaign(client, headers)
    response = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
    assert response.status_code == 202
    async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
        await wait_for_send_status(container, campaign_id, "submitting")
    await _deferred_by_a_batch_provider(container, "reader-2@example.test")
    async with running(container, handlers):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    assert await recipient_states(container, campaign_id) == {
        "sent": 57,
        "uncertain": 1,
        "failed": 2,
    }
    first = await _captured(container)
    provider.failures = {"reader-4@example.test": PermanentFailure(status=550)}

    for state, reader, expected in (
        ("uncertain", "reader-1@example.test", {"sent": 58, "failed": 2}),
        ("failed", "reader-2@example.test", {"sent": 59, "failed": 1}),
    ):
        response = await client.post(
            f"/api/admin/campaigns/{campaign_id}/resend",
            json={"state": state, "note": f"resend the {state}"},
            headers=headers,
        )
        assert response.status_code == 202, response.text
        assert response.json()["recipients_requeued"] == 1
        async with running(container, handlers):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        assert await recipient_states(container, campaign_id) == expected
        now = await _captured(container)
        assert now - first == Counter({reader: 1})
        first = now

    assert set(first.values()) == {1}
    assert "reader-4@example.test" not in first
    status = (
        await client.get(f"/api/admin/campaigns/{campaign_id}/status", headers=headers)
    ).json()
    assert (status["status"], status["attempt"], status["recipients"]) == (
        "submitted",
        3,
        {"sent": 59, "failed": 1, "excluded": 0, "uncertain": 0, "cancelled": 0},
    )
    nothing = await client.post(
        f"/api/admin/campaigns/{campaign_id}/resend",
        json={"state": "failed", "note": "again"},
        headers=headers,
    )
    assert nothing.status_code == 400  # only a permanent refusal is left
    assert nothing.json()["code"] == "resend_refused"
    async with container.db.read() as conn:
        audit = await interventions.list_for(conn, campaign_id)
    assert [(a.action, a.outcome, a.attempt, a.recipient_count) for a in audit] == [
        ("resend", "uncertain", 2, 1),
        ("resend", "failed", 3, 1),
    ]
    assert {a.note for a in audit} == {"resend the uncertain", "resend the failed"}
