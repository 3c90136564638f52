"""Webhook jobs stay tied to their delivery when SQLite hands a deleted row's id to a new one
(issue 12, item 5)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from tests.e2e.test_delivery_engine import FAST_QUEUE, Receiver, serving
from tests.factories import admin_headers, api_client, make_settings
from tests.support.waiting import wait_for
from tidings.domain.jobs import GiveUp, JobStatus
from tidings.domain.webhook_events import webhook_delivery_key
from tidings.outbound.webhooks import DELIVER_WEBHOOK
from tidings.queue import rounds

LEASE = timedelta(seconds=60)


async def test_a_recreated_endpoint_with_a_reused_id_gets_its_test_delivery(
    database_url: str,
) -> None:
    """An admin who deletes an endpoint and adds it again must see the next test delivered, not
    stuck `pending` behind the old endpoint's finished job."""
    settings = make_settings(
        database_url, queue=FAST_QUEUE, webhooks={"allow_private_networks": True}
    )
    async with Receiver() as receiver, serving(settings) as (client, container):
        headers = await admin_headers(container)
        definition = {"url": receiver.url, "event_types": ["webhook.test"]}

        async def delivered_once(endpoint_id: int) -> list[dict[str, Any]]:
            log = await client.get(f"/api/admin/webhooks/{endpoint_id}/deliveries", headers=headers)
            return [d for d in log.json()["items"] if d["status"] == "delivered"]

        first = (await client.post("/api/admin/webhooks", headers=headers, json=definition)).json()
        await client.post(f"/api/admin/webhooks/{first['id']}/test", headers=headers)
        (old_delivery,) = await wait_for(lambda: delivered_once(first["id"]))
        deleted = await client.delete(f"/api/admin/webhooks/{first['id']}", headers=headers)
        assert deleted.status_code == 204

        again = (await client.post("/api/admin/webhooks", headers=headers, json=definition)).json()
        test = (
            await client.post(f"/api/admin/webhooks/{again['id']}/test", headers=headers)
        ).json()
        if container.db.is_sqlite:  # the situation this guards against: both ids come back
            assert (again["id"], test["id"]) == (first["id"], old_delivery["id"])
        (delivery,) = await wait_for(lambda: delivered_once(again["id"]))
        assert delivery["id"] == test["id"]
        assert len(receiver.requests) == 2


async def test_a_job_left_from_a_deleted_delivery_never_delivers_the_row_reusing_its_id(
    database_url: str,
) -> None:
    """A job still queued for a deleted endpoint must not send another endpoint's event that
    happens to get the same delivery id: that receiver would get it twice."""
    settings = make_settings(database_url, webhooks={"allow_private_networks": True})
    async with Receiver() as receiver, api_client(settings) as (client, container):
        headers = await admin_headers(container)
        definition = {"url": receiver.url, "event_types": ["webhook.test"]}
        first = (await client.post("/api/admin/webhooks", headers=headers, json=definition)).json()
        old = (await client.post(f"/api/admin/webhooks/{first['id']}/test", headers=headers)).json()
        old_job, _ = await container.queue.get_by_key(
            webhook_delivery_key(old["event_id"], first["id"])
        )
        await client.delete(f"/api/admin/webhooks/{first['id']}", headers=headers)
        again = (await client.post("/api/admin/webhooks", headers=headers, json=definition)).json()
        new = (await client.post(f"/api/admin/webhooks/{again['id']}/test", headers=headers)).json()
        if container.db.is_sqlite:
            assert new["id"] == old["id"]
        new_job, _ = await container.queue.get_by_key(
            webhook_delivery_key(new["event_id"], again["id"])
        )
        assert new_job.id != old_job.id
        assert new_job.status is JobStatus.PENDING
        async with container.db.write() as conn:  # taken as a worker takes them (fenced writes)
            claimed = await rounds.claim(
                conn, kinds=[DELIVER_WEBHOOK], limit=10, now=container.clock(), lease=LEASE
            )
        by_id = {job.id: job for job in claimed}
        old_job, new_job = by_id[old_job.id], by_id[new_job.id]

        (handler,) = [r.handler for r in container.handler_registry() if r.kind == DELIVER_WEBHOOK]
        with pytest.raises(GiveUp):
            await handler(old_job)
        assert receiver.requests == []
        await handler(new_job)
        await wait_for(lambda: asyncio.sleep(0, result=len(receiver.requests) == 1))
        assert receiver.requests[0][0]["webhook-id"] == new["event_id"]
