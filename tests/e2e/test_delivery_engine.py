"""Transactional email and webhooks through the real app, queue and workers (issue 3).

`tidings serve` mode: the API and the workers run in one process; mail goes to the capture
provider or to the SMTP sink over loopback; webhooks go to a receiver on loopback.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email import message_from_bytes
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from standardwebhooks import Webhook

from tests.factories import STARTUP_SECONDS, admin_headers, make_settings, real_mail
from tests.support.waiting import wait_for
from tidings.api.app import create_app
from tidings.bootstrap import Container, utcnow
from tidings.config import Settings
from tidings.devservers.sink import Faults, SmtpSink

FAST_QUEUE = {
    "poll_interval_seconds": 0.05,
    "backoff_base_seconds": 0.05,
    "backoff_max_seconds": 0.2,
    "max_attempts": 3,
    "lease_seconds": 30,
}


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, Container]]:
    app = create_app(settings, apply_migrations=True, run_workers=True)
    async with LifespanManager(app, startup_timeout=STARTUP_SECONDS) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://tidings.test") as client:
            yield client, app.state.container


async def test_transactional_email_is_captured_and_readable(database_url: str) -> None:
    """The zero-configuration path: queue a message through the API, the in-process worker sends it
    through the capture provider, the outbox API shows it."""
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with serving(settings) as (client, container):
        headers = await admin_headers(container)
        body = {
            "to": "reader@example.org",
            "subject": "Welcome",
            "text": "Hello there",
            "idempotency_key": "welcome-1",
        }
        first = await client.post("/api/admin/emails", json=body, headers=headers)
        again = await client.post("/api/admin/emails", json=body, headers=headers)
        assert first.status_code == again.status_code == 202
        assert first.json()["job_id"] == again.json()["job_id"]
        assert again.json()["created"] is False

        async def captured() -> list[dict[str, Any]]:
            page = await client.get("/api/admin/outbox", headers=headers)
            return list(page.json()["items"])

        (item,) = await wait_for(captured)
        assert item["recipients"] == ["reader@example.org"]
        assert item["subject"] == "Welcome"
        raw = await client.get(f"/api/admin/outbox/{item['id']}/raw", headers=headers)
        parsed = message_from_bytes(raw.content)
        assert parsed["To"] == "reader@example.org"
        assert "Hello there" in raw.text
        job = (
            await client.get(f"/api/admin/jobs/{first.json()['job_id']}", headers=headers)
        ).json()
        assert job["status"] == "done"
        assert "payload" not in job  # payloads carry addresses; the admin view does not


@pytest.mark.parametrize(
    ("recipient", "faults", "expected_status", "expected_error"),
    [
        ("ok@example.org", Faults(), "done", None),
        ("gone+reject550@example.org", Faults(), "dead", "recipient rejected permanently 550"),
        ("ok@example.org", Faults(data_reply="554 5.7.1 no"), "dead", "smtp permanent failure 554"),
        (
            "ok@example.org",
            Faults(data_reply="451 4.3.0 later"),
            "dead",
            "smtp temporary failure 451",
        ),
        ("ok@example.org", Faults(disconnect_during_data=True), "dead", None),
    ],
    ids=["accepted", "rcpt-550", "data-554", "data-451-retried-until-dead", "disconnect"],
)
async def test_smtp_outcomes_map_onto_the_queue(
    database_url: str,
    recipient: str,
    faults: Faults,
    expected_status: str,
    expected_error: str | None,
) -> None:
    """5xx is permanent (dead after one attempt); 4xx and dropped connections retry with backoff
    until attempts run out; an accepted message is done."""
    async with SmtpSink(clock=utcnow, faults=faults) as sink:
        settings = make_settings(
            database_url,
            queue=FAST_QUEUE,
            smtp={"host": sink.host, "port": sink.port, "security": "none", "timeout_seconds": 2},
            **real_mail(provider="smtp", from_address="news@example.com"),
        )
        async with serving(settings) as (client, container):
            headers = await admin_headers(container)
            queued = await client.post(
                "/api/admin/emails",
                headers=headers,
                json={"to": recipient, "subject": "Hi", "text": "Body"},
            )
            job_id = queued.json()["job_id"]

            async def settled() -> dict[str, Any] | None:
                job = (await client.get(f"/api/admin/jobs/{job_id}", headers=headers)).json()
                return job if job["status"] in ("done", "dead") else None

            job = await wait_for(settled)
    assert job["status"] == expected_status
    if expected_error is not None:
        assert job["last_error"] == expected_error
    if expected_status == "done":
        assert len(sink.messages) == 1
        assert list(sink.messages[0].recipients) == [recipient]
    else:
        assert sink.messages == []
        permanent = expected_error is not None and "permanent" in expected_error
        assert len(job["history"]) == (1 if permanent else FAST_QUEUE["max_attempts"])
        assert "example.org" not in json.dumps(job)  # no address in stored errors


class Receiver:
    """A webhook receiver on loopback that records what it gets and answers `status`."""

    def __init__(self, delay_seconds: float = 0.0) -> None:
        self.status = 200
        self.delay_seconds = delay_seconds
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self._server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> Receiver:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode().split("\r\n")[1:]
        headers = {
            k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines if line)
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests.append((headers, body))
        await asyncio.sleep(self.delay_seconds)
        writer.write(
            f"HTTP/1.1 {self.status} X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".encode()
        )
        await writer.drain()
        writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def url_as(self, host: str) -> str:
        return f"http://{host}:{self.port}/hooks"


async def test_webhook_is_signed_delivered_logged_and_replayable(database_url: str) -> None:
    """Receivers verify with the standardwebhooks library; the delivery log shows the outcome; a
    replay sends the same webhook-id again."""
    settings = make_settings(
        database_url, queue=FAST_QUEUE, webhooks={"allow_private_networks": True}
    )
    async with Receiver() as receiver, serving(settings) as (client, container):
        headers = await admin_headers(container)
        created = await client.post(
            "/api/admin/webhooks",
            headers=headers,
            json={"url": receiver.url, "event_types": ["webhook.test"]},
        )
        assert created.status_code == 201
        endpoint = created.json()
        assert endpoint["secret"].startswith("whsec_")
        listed = (await client.get("/api/admin/webhooks", headers=headers)).json()["items"]
        assert "secret" not in listed[0]

        test = await client.post(f"/api/admin/webhooks/{endpoint['id']}/test", headers=headers)
        assert test.status_code == 202
        await wait_for(lambda: asyncio.sleep(0, result=len(receiver.requests) == 1))
        request_headers, body = receiver.requests[0]
        verified = Webhook(endpoint["secret"]).verify(body, request_headers)
        assert verified["type"] == "webhook.test"

        async def delivered() -> list[dict[str, Any]]:
            log = await client.get(
                f"/api/admin/webhooks/{endpoint['id']}/deliveries", headers=headers
            )
            return [d for d in log.json()["items"] if d["status"] == "delivered"]

        (delivery,) = await wait_for(delivered)
        assert delivery["last_status_code"] == 200
        replay = await client.post(
            f"/api/admin/webhooks/deliveries/{delivery['id']}/replay", headers=headers
        )
        assert replay.status_code == 202
        await wait_for(lambda: asyncio.sleep(0, result=len(receiver.requests) == 2))
        assert receiver.requests[1][0]["webhook-id"] == request_headers["webhook-id"]


async def test_rotated_secret_signs_with_both_secrets_during_overlap(database_url: str) -> None:
    """Receivers switch secrets at their own pace: during the overlap both verify."""
    settings = make_settings(
        database_url, queue=FAST_QUEUE, webhooks={"allow_private_networks": True}
    )
    async with Receiver() as receiver, serving(settings) as (client, container):
        headers = await admin_headers(container)
        endpoint = (
            await client.post(
                "/api/admin/webhooks",
                headers=headers,
                json={"url": receiver.url, "event_types": ["*"]},
            )
        ).json()
        rotated = (
            await client.post(
                f"/api/admin/webhooks/{endpoint['id']}/rotate-secret", headers=headers
            )
        ).json()
        assert rotated["secret"] != endpoint["secret"]
        await client.post(f"/api/admin/webhooks/{endpoint['id']}/test", headers=headers)
        await wait_for(lambda: asyncio.sleep(0, result=len(receiver.requests) == 1))
        request_headers, body = receiver.requests[0]
        for secret in (endpoint["secret"], rotated["secret"]):
            assert Webhook(secret).verify(body, request_headers)["type"] == "webhook.test"


async def test_410_disables_the_endpoint(database_url: str) -> None:
    """A receiver that answers 410 Gone asked to be left alone: stop sending, and say why."""
    settings = make_settings(
        database_url, queue=FAST_QUEUE, webhooks={"allow_private_networks": True}
    )
    async with Receiver() as receiver, serving(settings) as (client, container):
        receiver.status = 410
        headers = await admin_headers(container)
        endpoint = (
            await client.post(
                "/api/admin/webhooks",
                headers=headers,
                json={"url": receiver.url, "event_types": ["*"]},
            )
        ).json()
        await client.post(f"/api/admin/webhooks/{endpoint['id']}/test", headers=headers)

        async def disabled() -> dict[str, Any] | None:
            current = (
                await client.get(f"/api/admin/webhooks/{endpoint['id']}", headers=headers)
            ).json()
            return None if current["enabled"] else current

        current = await wait_for(disabled)
        assert "410" in current["disabled_reason"]
        assert len(receiver.requests) == 1


async def test_ssrf_guard_blocks_loopback_endpoint_by_default(database_url: str) -> None:
    """With the guard on (the default), a URL pointing at this machine is never dialed. A
    literal loopback IP is refused when saved; a name that resolves to one is caught when
    dialed."""
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with Receiver() as receiver, serving(settings) as (client, container):
        headers = await admin_headers(container)
        endpoint = (
            await client.post(
                "/api/admin/webhooks",
                headers=headers,
                json={"url": receiver.url_as("localhost"), "event_types": ["*"]},
            )
        ).json()
        await client.post(f"/api/admin/webhooks/{endpoint['id']}/test", headers=headers)

        async def blocked() -> list[dict[str, Any]]:
            log = await client.get(
                f"/api/admin/webhooks/{endpoint['id']}/deliveries", headers=headers
            )
            return [d for d in log.json()["items"] if d["status"] == "blocked"]

        (delivery,) = await wait_for(blocked)
        assert "loopback" in delivery["last_error"]
        assert receiver.requests == []
        dead = (
            await client.get("/api/admin/jobs", params={"status": "dead"}, headers=headers)
        ).json()["items"]
        assert [job["kind"] for job in dead] == ["deliver_webhook"]


async def test_bad_webhook_input_is_rejected_and_changes_nothing(database_url: str) -> None:
    """A bad endpoint definition is refused at the door, with nothing stored."""
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with serving(settings) as (client, container):
        headers = await admin_headers(container)
        for body in (
            {"url": "ftp://example.org/x", "event_types": ["*"]},
            {"url": "not a url", "event_types": ["*"]},
            {"url": "https://user:pw@example.org/", "event_types": ["*"]},
            {"url": "https://example.org/", "event_types": ["no.such.event"]},
            {"url": "https://example.org/", "event_types": []},
            {"url": "https://example.org/"},
        ):
            response = await client.post("/api/admin/webhooks", headers=headers, json=body)
            assert response.status_code == 422, body
            assert response.headers["content-type"] == "application/problem+json"
        assert (await client.get("/api/admin/webhooks", headers=headers)).json()["items"] == []
        missing = await client.post("/api/admin/webhooks/999/test", headers=headers)
        assert missing.status_code == 404
        bad_email = await client.post(
            "/api/admin/emails",
            headers=headers,
            json={"to": "x@y.z", "subject": "a\r\nBcc: evil@x.y", "text": "t"},
        )
        assert bad_email.status_code == 422
        assert (await client.get("/api/admin/jobs", headers=headers)).json()["items"] == []


async def test_a_slow_webhook_host_does_not_delay_another_host(database_url: str) -> None:
    """DLV-7 through the real worker: deliveries to a host at its concurrency bound are deferred (no
    attempt spent) instead of holding worker slots, so other hosts keep flowing."""
    settings = make_settings(
        database_url,
        queue={**FAST_QUEUE, "webhook_concurrency": 4},
        webhooks={"allow_private_networks": True, "per_host_concurrency": 1},
    )
    async with (
        Receiver(delay_seconds=1.0) as slow,
        Receiver() as fast,
        serving(settings) as (
            client,
            container,
        ),
    ):
        headers = await admin_headers(container)
        slow_hook = (
            await client.post(
                "/api/admin/webhooks",
                headers=headers,
                json={"url": slow.url_as("localhost"), "event_types": ["webhook.test"]},
            )
        ).json()
        fast_hook = (
            await client.post(
                "/api/admin/webhooks",
                headers=headers,
                json={"url": fast.url, "event_types": ["webhook.test"]},
            )
        ).json()
        for _ in range(6):
            await client.post(f"/api/admin/webhooks/{slow_hook['id']}/test", headers=headers)
        await wait_for(lambda: asyncio.sleep(0, result=len(slow.requests) >= 1))
        await client.post(f"/api/admin/webhooks/{fast_hook['id']}/test", headers=headers)
        # Within 5 s: the slow host's six deliveries take at least 6 s one after another.
        await wait_for(lambda: asyncio.sleep(0, result=len(fast.requests) == 1), within_seconds=5)
        assert len(slow.requests) < 6  # the slow host's backlog is still being worked through
        await wait_for(lambda: asyncio.sleep(0, result=len(slow.requests) == 6), within_seconds=20)
        jobs = await container.queue.list_jobs(kind="deliver_webhook")
    assert all(job.attempts <= 1 for job in jobs)  # waiting for a busy host spent no attempts
