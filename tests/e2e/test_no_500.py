"""No 500 on any input or state (issue 12, item 4; PRI-8): malformed and private webhook URLs,
PATCH null, naive times, and a database whose write lock another process holds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.locks import write_lock_held
from tests.support.tables import every_row
from tests.support.waiting import wait_for
from tidings.bootstrap import Container
from tidings.config import load_settings
from tidings.domain.jobs import JobStatus
from tidings.queue.policy import HandlerRegistry
from tidings.queue.worker import Worker

UNPARSEABLE_URLS = ["http://[::1", "http://[zz]/x", "https://example.org:99999/", "http://a b/"]
LITERAL_PRIVATE_URLS = {
    "http://127.0.0.1:8080/hooks": "loopback",
    "http://[::1]/hooks": "loopback",
    "http://10.1.2.3/hooks": "private",
    "http://192.168.0.10/hooks": "private",
    "http://0x7f.1/hooks": "loopback",
    "http://2130706433/hooks": "loopback",
    "http://[::ffff:127.0.0.1]/hooks": "loopback",
    "http://169.254.169.254/latest/meta-data": "cloud metadata",
    "http://[fd00:ec2::254]/": "cloud metadata",
}


@pytest.fixture
async def admin(
    database_url: str,
) -> AsyncIterator[tuple[httpx.AsyncClient, Container, dict[str, str]]]:
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        yield client, container, headers


async def test_malformed_and_literal_private_webhook_urls_are_422_naming_the_range(
    admin: Any,
) -> None:
    """A URL the guard would never dial is refused when saved, with the reason, instead of a 500
    (malformed) or an endpoint that can only ever fail (a private IP)."""
    client, container, headers = admin
    endpoint = await client.post(
        "/api/admin/webhooks",
        headers=headers,
        json={"url": "https://hooks.example.org/in", "event_types": ["*"]},
    )
    assert endpoint.status_code == 201
    path = f"/api/admin/webhooks/{endpoint.json()['id']}"
    before = await every_row(container.db)
    for url in [*UNPARSEABLE_URLS, *LITERAL_PRIVATE_URLS]:
        created = await client.post(
            "/api/admin/webhooks", headers=headers, json={"url": url, "event_types": ["*"]}
        )
        changed = await client.patch(path, headers=headers, json={"url": url})
        for response in (created, changed):
            assert response.status_code == 422, (url, response.text)
            assert response.json()["errors"][0]["field"] == "url"
        if url in LITERAL_PRIVATE_URLS:
            assert LITERAL_PRIVATE_URLS[url] in created.json()["detail"]
    assert await every_row(container.db) == before


async def test_allow_private_networks_lets_private_literals_be_saved_but_never_metadata(
    database_url: str,
) -> None:
    """Self-hosted receivers (and the test suite's loopback receivers) need private addresses;
    the cloud's credential service stays out of reach even then."""
    settings = make_settings(database_url, webhooks={"allow_private_networks": True})
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        for url, reason in LITERAL_PRIVATE_URLS.items():
            response = await client.post(
                "/api/admin/webhooks", headers=headers, json={"url": url, "event_types": ["*"]}
            )
            expected = 422 if reason == "cloud metadata" else 201
            assert response.status_code == expected, (url, response.text)


async def test_patch_null_clears_reply_to(admin: Any) -> None:
    """`null` is how a JSON client says "remove it"; ignoring it leaves replies going to an
    address the publisher wanted gone."""
    client, _, headers = admin
    await create_newsletter(client, headers, reply_to="old@example.org")
    cleared = await client.patch(
        "/api/admin/newsletters/weekly", headers=headers, json={"reply_to": None}
    )
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["reply_to"] is None
    current = (await client.get("/api/admin/newsletters/weekly", headers=headers)).json()
    assert current["reply_to"] is None
    refused = await client.patch(
        "/api/admin/newsletters/weekly", headers=headers, json={"sender_address": None}
    )
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["field"] == "sender_address"
    campaign = await client.post(
        "/api/admin/campaigns",
        headers=headers,
        json={"newsletter": "weekly", "subject": "S", "body": "B", "reply_to": "c@example.org"},
    )
    path = f"/api/admin/campaigns/{campaign.json()['id']}"
    patched = await client.patch(path, headers=headers, json={"reply_to": None})
    assert patched.json()["reply_to"] is None
    assert (await client.get(path, headers=headers)).json()["reply_to"] is None


async def test_a_naive_scheduled_at_is_refused_with_a_timezone_message(admin: Any) -> None:
    """ "09:00" without a zone is nobody's 9 o'clock: say a timezone is needed, don't 500 or
    guess."""
    client, container, headers = admin
    await create_newsletter(client, headers)
    draft = await client.post(
        "/api/admin/campaigns",
        headers=headers,
        json={"newsletter": "weekly", "subject": "S", "body": "B"},
    )
    campaign_id = draft.json()["id"]
    before = await every_row(container.db)
    naive = "2099-12-01T09:00:00"
    attempts = [
        ("POST", "/api/admin/campaigns", {"newsletter": "weekly", "subject": "S", "body": "B"}),
        ("PATCH", f"/api/admin/campaigns/{campaign_id}", {}),
        ("POST", f"/api/admin/campaigns/{campaign_id}/schedule", {}),
    ]
    for method, path, body in attempts:
        response = await client.request(
            method, path, headers=headers, json={**body, "scheduled_at": naive}
        )
        assert response.status_code == 422, (path, response.text)
        (error,) = response.json()["errors"]
        assert error["field"] == "body.scheduled_at"
        assert "timezone" in error["message"]
    assert await every_row(container.db) == before


async def test_a_request_meeting_a_held_write_lock_gets_503_with_retry_after(
    sqlite_url: str,
) -> None:
    """A long import or another worker process can hold SQLite's one write lock past the busy
    timeout; the client must hear "busy, try again" (503, Retry-After), not a 500. PostgreSQL
    has no busy timeout (writers wait on row locks), so this state exists on SQLite only."""
    settings = load_settings(
        database={"url": sqlite_url, "sqlite_busy_timeout_ms": 50}, log={"format": "json"}
    )
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        before = await every_row(container.db)
        with write_lock_held(sqlite_url):
            response = await client.post(
                "/api/admin/newsletters",
                headers=headers,
                json={"slug": "n", "name": "N", "sender_name": "S", "sender_address": "s@x.org"},
            )
        assert response.status_code == 503, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == "database_busy"
        assert int(response.headers["Retry-After"]) >= 1
        assert await every_row(container.db) == before
        again = await client.post(
            "/api/admin/newsletters",
            headers=headers,
            json={"slug": "n", "name": "N", "sender_name": "S", "sender_address": "s@x.org"},
        )
        assert again.status_code == 201


async def test_a_job_meeting_a_held_write_lock_is_retried_not_counted_a_crash(
    sqlite_url: str,
) -> None:
    """A handler whose write meets a busy database has lost nothing: the worker logs a retry
    and runs it again later, rather than reporting a crashed handler."""
    settings = load_settings(
        database={"url": sqlite_url, "sqlite_busy_timeout_ms": 50}, log={"format": "json"}
    )
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        lock_taken, attempts = asyncio.Event(), []

        async def rename_newsletter(_job: Any) -> None:
            attempts.append(1)
            if len(attempts) == 1:
                await lock_taken.wait()
            async with container.db.write() as conn:
                await conn.exec_driver_sql("UPDATE newsletters SET name = 'Renamed'")

        registry = HandlerRegistry()
        registry.register("rename_newsletter", rename_newsletter, concurrency=1)
        async with container.db.write() as conn:
            await container.queue.enqueue(conn, "rename_newsletter", "rename:1", {})
        worker = Worker(container.db, registry, container.queue.policy, container.clock)
        with capture_logs() as logs:
            assert await worker.claim_round() == 1
            with write_lock_held(sqlite_url):
                lock_taken.set()
                # The retry cannot be written while the lock is held either; it waits.
                await wait_for(
                    lambda: asyncio.sleep(
                        0, result=any(log["event"] == "job.outcome_write_failed" for log in logs)
                    )
                )
            await worker.drain(10)
        retried, _ = await container.queue.get_by_key("rename:1")
        assert retried.status is JobStatus.PENDING
        assert retried.last_error is not None
        assert "busy" in retried.last_error
        events = [log["event"] for log in logs]
        assert "job.retry" in events
        assert "job.handler_crashed" not in events
