"""Reconciling a batch whose outcome is unknown (SND-13) through the batch provider over
loopback: the operator finds the batch's Message-IDs at the provider, records the decision
(audited), and the send moves on — finalised as submitted, or retried for the readers the
provider never had — with nobody mailed twice."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from tests.support.sending import (
    batch_provider_settings,
    create_campaign,
    recipient_states,
    registry,
    running,
    studio_with,
    wait_for_campaign_status,
)
from tidings.bootstrap import Container
from tidings.devservers.dev_faults import Fault
from tidings.devservers.dev_server import DevProviderServer
from tidings.storage.sending import interventions
from tidings.storage.tables import campaign_batches

Studio = tuple[httpx.AsyncClient, Container, dict[str, str], DevProviderServer]
EVERY_READER = {f"reader-{n}@example.test": 1 for n in range(1, 101)}


@pytest.fixture
async def studio(database_url: str, dev_provider: DevProviderServer) -> AsyncIterator[Studio]:
    settings = batch_provider_settings(database_url, dev_provider.base_url)
    async with studio_with(settings, 100) as (client, container, headers):
        yield client, container, headers, dev_provider


async def _uncertain_send(studio: Studio, fault: str) -> tuple[int, int]:
    """A send whose one batch's answer was lost: (campaign id, that batch's id)."""
    client, container, headers, server = studio
    server.faults.replace([Fault(action=fault, times=1)])  # type: ignore[arg-type]
    campaign_id = await create_campaign(client, headers)
    response = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
    assert response.status_code == 202, response.text
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "failed"
    async with container.db.read() as conn:
        (batch_id,) = (
            await conn.execute(
                select(campaign_batches.c.id).where(
                    campaign_batches.c.campaign_id == campaign_id,
                    campaign_batches.c.status == "submitting",
                )
            )
        ).scalars()
    return campaign_id, int(batch_id)


async def _all_recipients(studio: Studio, campaign_id: int, state: str) -> list[dict[str, Any]]:
    """Every page of the listing, following the cursor, 7 at a time."""
    client, _container, headers, _server = studio
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"state": state, "limit": 7}
        if cursor:
            params["cursor"] = cursor
        response = await client.get(
            f"/api/admin/campaigns/{campaign_id}/recipients", params=params, headers=headers
        )
        assert response.status_code == 200, response.text
        page = response.json()
        found.extend(page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            return found


async def _reconcile(
    studio: Studio, campaign_id: int, batch_id: int, outcome: str, note: str = "checked"
) -> httpx.Response:
    client, _container, headers, _server = studio
    return await client.post(
        f"/api/admin/campaigns/{campaign_id}/batches/{batch_id}/reconcile",
        json={"as": outcome, "note": note},
        headers=headers,
    )


async def test_the_listing_gives_message_ids_the_provider_can_find(studio: Studio) -> None:
    """The runbook's first step: the uncertain readers' Message-IDs, a page at a time, are
    exactly the ones the provider holds when it did accept the batch."""
    campaign_id, batch_id = await _uncertain_send(studio, "drop_after_accept")
    listed = await _all_recipients(studio, campaign_id, "uncertain")
    states = await recipient_states(studio[1], campaign_id)
    assert len(listed) == states["uncertain"]
    assert [row["id"] for row in listed] == sorted({row["id"] for row in listed})
    server = studio[3]
    for row in listed:
        assert (row["batch_id"], row["state"], row["reason"]) == (
            batch_id,
            "uncertain",
            "mailgun_answer_lost",
        )
        (held,) = server.store.find(message_id=row["message_id"])
        assert held.address == row["address"]


async def test_reconciled_as_submitted_the_send_is_finalised_without_sending_again(
    studio: Studio,
) -> None:
    """The provider had the batch: its readers are sent, and with every batch accepted the
    failed send completes as submitted — by a new attempt that sends nothing."""
    client, container, headers, server = studio
    campaign_id, batch_id = await _uncertain_send(studio, "drop_after_accept")
    response = await _reconcile(studio, campaign_id, batch_id, "submitted", "found at provider")
    assert response.status_code == 200, response.text
    result = response.json()
    assert (result["outcome"], result["campaign_status"], result["attempt"]) == (
        "submitted",
        "submitting",
        2,
    )
    assert "finalises" in result["next_step"]
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    assert Counter(r.address for r in server.store.recipients) == EVERY_READER
    assert await recipient_states(container, campaign_id) == {"sent": 100}
    status = (
        await client.get(f"/api/admin/campaigns/{campaign_id}/status", headers=headers)
    ).json()
    assert (status["status"], status["completed"], status["recipients"]["sent"]) == (
        "submitted",
        100,
        100,
    )
    async with container.db.read() as conn:
        (audit,) = await interventions.list_for(conn, campaign_id)
    assert (audit.action, audit.batch_id, audit.outcome, audit.note) == (
        "reconcile",
        batch_id,
        "submitted",
        "found at provider",
    )
    assert audit.actor.startswith("admin:")
    assert audit.recipient_count == result["recipients"] > 0


async def test_reconciled_as_failed_the_send_becomes_retryable_and_the_retry_mails_them(
    studio: Studio,
) -> None:
    """The provider never had the batch (the connection dropped before it accepted): once
    the operator says so, the send is an ordinary retryable failure, and the retry sends
    exactly those readers."""
    client, container, headers, server = studio
    campaign_id, batch_id = await _uncertain_send(studio, "drop_before_accept")
    assert 0 < len(server.store.recipients) < 100
    response = await _reconcile(studio, campaign_id, batch_id, "failed", "not in provider log")
    assert response.status_code == 200, response.text
    assert response.json()["campaign_status"] == "failed"
    assert "retry" in response.json()["next_step"]
    status = (
        await client.get(f"/api/admin/campaigns/{campaign_id}/status", headers=headers)
    ).json()
    assert (status["error_code"], status["retryable"]) == ("batch_failed", True)
    failed = await _all_recipients(studio, campaign_id, "failed")
    assert {row["reason"] for row in failed} == {"reconciled_not_sent"}
    retry = await client.post(f"/api/admin/campaigns/{campaign_id}/retry", headers=headers)
    assert retry.status_code == 202, retry.text
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    assert Counter(r.address for r in server.store.recipients) == EVERY_READER
    assert await recipient_states(container, campaign_id) == {"sent": 100}


async def test_reconcile_refuses_what_it_cannot_decide_and_changes_nothing(
    studio: Studio,
) -> None:
    """Only a batch left submitting can be reconciled, by its own campaign, with a reason:
    anything else is a 4xx problem and leaves every row as it was (PRI-8)."""
    client, container, headers, _server = studio
    campaign_id, batch_id = await _uncertain_send(studio, "drop_after_accept")
    other = await create_campaign(client, headers, subject="Other")
    async with container.db.read() as conn:
        submitted = (
            (
                await conn.execute(
                    select(campaign_batches.c.id).where(
                        campaign_batches.c.campaign_id == campaign_id,
                        campaign_batches.c.status == "submitted",
                    )
                )
            )
            .scalars()
            .first()
        )
    before = await recipient_states(container, campaign_id)
    base = f"/api/admin/campaigns/{campaign_id}/batches"
    cases: list[tuple[str, Any, int]] = [
        (f"{base}/{submitted}/reconcile", {"as": "failed", "note": "x"}, 409),
        (
            f"/api/admin/campaigns/{other}/batches/{batch_id}/reconcile",
            {"as": "failed", "note": "x"},
            404,
        ),
        (f"{base}/999999/reconcile", {"as": "failed", "note": "x"}, 404),
        (f"{base}/{batch_id}/reconcile", {"as": "maybe", "note": "x"}, 422),
        (f"{base}/{batch_id}/reconcile", {"as": "failed"}, 422),
        (f"{base}/{batch_id}/reconcile", {"as": "failed", "note": "   "}, 422),
        (f"{base}/{batch_id}/reconcile", {"as": "failed", "note": "y" * 501}, 422),
        (f"{base}/{batch_id}/reconcile", [], 422),
        (f"{base}/0/reconcile", {"as": "failed", "note": "x"}, 422),
        (f"{base}/abc/reconcile", {"as": "failed", "note": "x"}, 422),
    ]
    for url, body, expected in cases:
        response = await client.post(url, json=body, headers=headers)
        assert response.status_code == expected, (url, body, response.text)
        assert response.headers["content-type"] == "application/problem+json"
    broken = await client.post(
        f"{base}/{batch_id}/reconcile",
        content=b'{"as": "failed",',
        headers={**headers, "content-type": "application/json"},
    )
    assert broken.status_code == 400
    refused = await client.post(
        f"{base}/{submitted}/reconcile", json={"as": "failed", "note": "x"}, headers=headers
    )
    assert refused.json()["code"] == "reconcile_refused"
    assert "not submitting" in refused.json()["detail"]
    assert await recipient_states(container, campaign_id) == before
    async with container.db.read() as conn:
        assert await interventions.list_for(conn, campaign_id) == []
    second = await _reconcile(studio, campaign_id, batch_id, "submitted")
    assert second.status_code == 200
    again = await _reconcile(studio, campaign_id, batch_id, "failed")
    assert again.status_code == 409  # decided once; the audit keeps the one decision


async def test_resend_refuses_a_send_that_is_not_finished_or_has_nobody_to_resend(
    studio: Studio,
) -> None:
    """A resend is for a finished send's uncertain or transiently failed readers: a draft,
    a failed send with a batch still undecided, or a send with nobody in that state is a
    400 problem, and nothing changes."""
    client, container, headers, _server = studio
    campaign_id, _batch_id = await _uncertain_send(studio, "drop_after_accept")
    draft = await create_campaign(client, headers, subject="Draft")
    before = await recipient_states(container, campaign_id)
    cases: list[tuple[int, Any, int]] = [
        (draft, {"state": "uncertain", "note": "x"}, 400),
        (campaign_id, {"state": "uncertain", "note": "x"}, 400),  # reconcile first
        (campaign_id, {"state": "sent", "note": "x"}, 422),
        (campaign_id, {"state": "uncertain"}, 422),
        (999999, {"state": "uncertain", "note": "x"}, 404),
    ]
    for target, body, expected in cases:
        response = await client.post(
            f"/api/admin/campaigns/{target}/resend", json=body, headers=headers
        )
        assert response.status_code == expected, (target, body, response.text)
        assert response.headers["content-type"] == "application/problem+json"
    assert await recipient_states(container, campaign_id) == before
