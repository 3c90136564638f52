"""Privacy requests against the whole product (AUD-10): a person's export holds their mail and
webhook deliveries, and after their deletion no table holds their address, name or token."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import AsyncIterator, Iterator
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default as default_policy
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from tests.e2e.audience_helpers import (
    create_newsletter,
    sent_confirmation_token,
    settled,
)
from tests.factories import admin_headers, api_client, make_settings
from tests.support.sending import FAST_QUEUE, create_campaign, wait_for_campaign_status, workers
from tests.support.webhook_receiver import loopback_webhook_client, receiver
from tidings.bootstrap import Container
from tidings.domain import tokens
from tidings.storage.tables import metadata

ADDRESS = "Zeb.Quarx@Example.org"  # stored as Zeb.Quarx@example.org; matched in any case
NAME = "Zebulon Quarx"
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]{24,}")


@pytest.fixture
async def site(
    database_url: str,
) -> AsyncIterator[tuple[httpx.AsyncClient, Container, dict[str, str]]]:
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with (
        receiver() as port,
        api_client(settings, webhook_client=loopback_webhook_client()) as (http, container),
    ):
        headers = await admin_headers(container)
        # With a welcome email: one more message to the person, queued when they confirm.
        await create_newsletter(
            http, headers, welcome_subject="Welcome aboard", welcome_body="Hello, reader."
        )
        hook = await http.post(
            "/api/admin/webhooks",
            headers=headers,
            json={"url": f"http://hooks.example.org:{port}/in", "event_types": ["*"]},
        )
        assert hook.status_code == 201, hook.text
        yield http, container, headers


def _texts(value: Any) -> Iterator[str]:
    """Every readable form of a stored value: text, JSON, bytes, base64 inside JSON (a raw
    message in a job payload) and the decoded parts of a stored email."""
    if value is None or isinstance(value, bool | int | float):
        return
    if isinstance(value, dict | list):
        yield json.dumps(value, ensure_ascii=False)
        for inner in value.values() if isinstance(value, dict) else value:
            yield from _texts(inner)
        return
    if isinstance(value, bytes):
        yield value.decode("latin-1")
        message = BytesParser(policy=default_policy).parsebytes(value)
        assert isinstance(message, EmailMessage)
        yield from (str(header) for header in message.values())
        for part in message.walk():
            if not part.is_multipart():
                yield str(part.get_content())
        return
    text = str(value)
    yield text
    if BASE64.fullmatch(text):
        try:
            decoded = base64.b64decode(text, validate=False)
        except (binascii.Error, ValueError):
            return
        yield from _texts(decoded)


async def _rows_holding(container: Container, needles: list[str]) -> list[tuple[str, str, str]]:
    """(table, column, needle) for every stored value, in every table the metadata defines
    (a table added later is covered too), that holds one of `needles` in any case."""
    found = []
    async with container.db.read() as conn:
        for table in metadata.sorted_tables:
            for row in await conn.execute(select(table)):
                for column, value in row._mapping.items():
                    for text in _texts(value):
                        found += [
                            (table.name, column, needle)
                            for needle in needles
                            if needle.lower() in text.lower()
                        ]
    return sorted(set(found))


async def test_privacy_delete_leaves_no_address_name_or_token_in_any_table(site: Any) -> None:
    """AUD-10: after a privacy delete nothing in the database may still hold the person's
    address, name or link tokens: not finished jobs, captured mail, webhook payloads or the
    confirmation-link table, whatever path their data took there."""
    client, container, headers = site
    async with workers(container):
        subscribed = await client.post(
            "/api/subscribe", json={"email": ADDRESS, "name": NAME, "newsletter": "weekly"}
        )
        assert subscribed.status_code == 202
        token = await sent_confirmation_token(container)
        assert (await client.post(f"/confirm/{token}")).status_code == 200
        campaign_id = await create_campaign(client, headers)
        tested = await client.post(
            f"/api/admin/campaigns/{campaign_id}/test-send",
            headers=headers,
            json={"to": [ADDRESS.upper()]},
        )
        assert tested.status_code == 202, tested.text
        sent = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        assert sent.status_code == 202, sent.text
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        await settled(container)
        needles = [ADDRESS, NAME, token, tokens.hash_token(token)]
        held = {table for table, _, _ in await _rows_holding(container, needles)}
        assert {"subscribers", "captured_messages", "webhook_deliveries"} <= held  # the probe sees
        subjects = {message.subject for message in await container.captured_mail.list()}
        assert "Welcome aboard" in subjects

        (subscriber,) = (
            await client.get("/api/admin/subscribers", params={"q": "zeb."}, headers=headers)
        ).json()["items"]
        deleted = await client.delete(f"/api/admin/subscribers/{subscriber['id']}", headers=headers)
        assert deleted.status_code == 204
        await settled(container)
    assert await _rows_holding(container, needles) == []


async def test_privacy_export_includes_mail_and_webhook_deliveries(site: Any) -> None:
    """AUD-10: a person asking what is stored about them gets the mail sent to them (queued
    and captured) and the webhook deliveries about them, not just their audience rows."""
    client, container, headers = site
    await client.post(
        "/api/subscribe", json={"email": ADDRESS, "name": NAME, "newsletter": "weekly"}
    )
    (subscriber,) = (
        await client.get("/api/admin/subscribers", params={"q": "zeb."}, headers=headers)
    ).json()["items"]
    campaign_id = await create_campaign(client, headers)
    await client.post(
        f"/api/admin/campaigns/{campaign_id}/test-send", headers=headers, json={"to": [ADDRESS]}
    )
    before = (
        await client.get(f"/api/admin/subscribers/{subscriber['id']}/export", headers=headers)
    ).json()
    queued = {(job["kind"], job["status"]) for job in before["jobs"]}
    assert queued == {("request_consent", "pending"), ("send_email", "pending")}
    assert before["captured_mail"] == []
    assert before["webhook_deliveries"] == []  # published when the request is carried out
    async with workers(container):
        await settled(container)
    after = (
        await client.get(f"/api/admin/subscribers/{subscriber['id']}/export", headers=headers)
    ).json()
    done = {(job["kind"], job["status"]) for job in after["jobs"]}
    assert done == {
        ("request_consent", "done"),
        ("send_subscriber_email", "done"),
        ("send_email", "done"),
    }
    subjects = sorted(message["subject"] for message in after["captured_mail"])
    assert subjects == ["Confirm your subscription to The Weekly", "[Test] Issue 1"]
    assert all("Zeb.Quarx@example.org" in m["raw"] for m in after["captured_mail"])
    (delivery,) = after["webhook_deliveries"]
    assert (delivery["event_type"], delivery["status"]) == ("subscriber.created", "delivered")
    assert delivery["payload"]["data"]["email"] == "Zeb.Quarx@example.org"
    assert delivery["payload"]["data"]["name"] == NAME
