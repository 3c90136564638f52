"""A real send in each tracking mode, read back from the SMTP sink (ENG-1, ENG-2): what each
mail carries, whose it says it is, and the links stored for the click and open endpoints."""

from __future__ import annotations

import re
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default
from typing import Any

from sqlalchemy import select, update

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client
from tests.support.sending import (
    batch_provider_settings,
    registry,
    running,
    seed,
    sink_settings,
    wait_for_campaign_status,
    workers,
)
from tidings.bootstrap import Container, utcnow
from tidings.devservers.dev_server import DevProviderServer
from tidings.devservers.sink import SmtpSink
from tidings.domain.tracking import TrackingSigner
from tidings.storage.campaign_links import StoredLink, links_of
from tidings.storage.tables import campaign_recipients, subscribers

PUBLIC = "https://news.example.org"
BODY = """\
Hello {{ name | fallback: "reader" }}. Read [the story](https://example.org/story?a=1&b=2),
then [the story again](https://example.org/story?a=1&b=2).

[Write to us](mailto:ed@example.org), [your settings]({{ preferences_url }}),
[leave]({{ unsubscribe_url }}), [pay here](https://bank.example.org/pay "notrack").

::: only paid
Members: [the briefing](https://example.org/briefing).
:::

::: button https://example.org/friend
Tell a friend
:::
"""
TRACKED = re.compile(re.escape(PUBLIC) + r"/([co])/([^/\s\"()]+)/([A-Za-z0-9._-]+)")
URL = re.compile(r"(?:https?|mailto):[^\s\"'<>()]+")


def _parts(data: bytes) -> dict[str, str]:
    message = message_from_bytes(data, policy=default)
    assert isinstance(message, EmailMessage)
    return {
        part.get_content_type(): str(part.get_content())
        for part in message.walk()
        if not part.is_multipart()
    }


async def _run(
    settings: Any, sink: SmtpSink, mode: str, readers: int, consented: int
) -> dict[str, Any]:
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers, tracking=mode, archive=True)
        await seed(container, "weekly", readers)
        consenting = await _consent(container, consented)
        created = await client.post(
            "/api/admin/campaigns",
            json={"newsletter": "weekly", "subject": "Issue 1", "body": BODY},
            headers=headers,
        )
        assert created.status_code == 201, created.text
        campaign_id = int(created.json()["id"])
        shown = await client.get(f"/api/admin/campaigns/{campaign_id}/preview", headers=headers)
        tested = await client.post(
            f"/api/admin/campaigns/{campaign_id}/test-send",
            json={"to": ["tester@example.org"]},
            headers=headers,
        )
        assert tested.status_code == 202, tested.text
        sent = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        assert sent.status_code == 202, sent.text
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
            arrived = await sink.wait_for(readers + 1)
        async with container.db.read() as conn:
            stored = await links_of(conn, campaign_id)
            rows = await conn.execute(
                select(campaign_recipients.c.id, subscribers.c.email).join(
                    subscribers, subscribers.c.id == campaign_recipients.c.subscriber_id
                )
            )
            recipient_of = {row.email: row.id for row in rows if row.id is not None}
        return {
            "campaign_id": campaign_id,
            "preview": shown,
            "mail": {message.recipients[0]: _parts(message.data) for message in arrived},
            "stored": stored,
            "recipient_of": recipient_of,
            "consenting": consenting,
            "signer": TrackingSigner(container.site_secret()),
        }


async def _consent(container: Container, count: int) -> set[str]:
    """Record tracking consent for the first `count` subscribers; their addresses."""
    async with container.db.write() as conn:
        emails = [
            row.email
            for row in await conn.execute(
                select(subscribers.c.email).order_by(subscribers.c.id).limit(count)
            )
        ]
        await conn.execute(
            update(subscribers)
            .where(subscribers.c.email.in_(emails))
            .values(tracking_consent_at=container.clock(), tracking_consent_source="signup")
        )
    return set(emails)


def _untracked_allowed(url: str, campaign_id: int) -> bool:
    return (
        url.startswith((PUBLIC + "/unsubscribe/", PUBLIC + "/preferences/"))
        or url in ("mailto:ed@example.org", "https://bank.example.org/pay")
        or url == f"{PUBLIC}/archive/weekly/{campaign_id}"
    )


async def test_a_newsletter_that_does_not_track_sends_no_pixel_and_no_rewritten_link(
    database_url: str,
) -> None:
    """ENG-1's default: with tracking off nothing in the mail leads back to us but the
    unsubscribe and preferences links, and no link is stored."""
    sent = await _send_on(database_url, "off", readers=2)
    for parts in sent["mail"].values():
        for part in parts.values():
            assert TRACKED.search(part) is None
            assert "https://example.org/story?a=1&b=2" in part.replace("&amp;", "&")
    assert sent["stored"] == []
    assert "X-Tidings-Warnings" not in sent["preview"].headers


async def test_an_aggregate_send_tracks_every_link_it_may_and_names_nobody(
    database_url: str,
) -> None:
    """ENG-1 aggregate and ENG-2: every content link goes through the click endpoint in HTML
    and text, the pixel only in HTML, each message with its own anonymous token; the links the
    endpoints need are stored; the preview says so and the test copy is not tracked."""
    sent = await _send_on(database_url, "aggregate", readers=4)
    campaign_id, signer = sent["campaign_id"], sent["signer"]
    keys = set()
    for address, parts in sent["mail"].items():
        if address == "tester@example.org":
            assert all(TRACKED.search(part) is None for part in parts.values())
            continue
        html, text = parts["text/html"], parts["text/plain"]
        for part in (html, text):
            for url in URL.findall(part.replace("&amp;", "&")):
                assert TRACKED.fullmatch(url) or _untracked_allowed(url, campaign_id), url
        assert [m[1] for m in TRACKED.finditer(html)][-1] == "o"  # the pixel, last
        assert "o" not in [m[1] for m in TRACKED.finditer(text)]
        tokens = {m[3] for m in TRACKED.finditer(html)} | {m[3] for m in TRACKED.finditer(text)}
        assert len(tokens) == 1
        message = signer.read_message(campaign_id, tokens.pop())
        assert message is not None
        assert message.recipient_id is None
        keys.add(message.message_key)
        for match in TRACKED.finditer(html):
            link = signer.read_link(match[2])
            assert link is not None
            assert link.campaign_id == campaign_id
    assert len(keys) == 4  # a random value per message: what makes unique counts unique
    assert sent["stored"] == [
        ("free", StoredLink(0, "")),
        ("free", StoredLink(1, "https://example.org/story?a=1&b=2")),
        ("free", StoredLink(2, "https://example.org/friend")),
        ("free", StoredLink(3, PUBLIC, hidden=True)),
        ("paid", StoredLink(0, "")),
        ("paid", StoredLink(1, "https://example.org/story?a=1&b=2")),
        ("paid", StoredLink(2, "https://example.org/briefing")),
        ("paid", StoredLink(3, "https://example.org/friend")),
        ("paid", StoredLink(4, PUBLIC, hidden=True)),
    ]
    assert "Links are tracked when sent" in sent["preview"].headers["X-Tidings-Warnings"]
    assert TRACKED.search(sent["preview"].text) is None


async def test_a_per_person_send_names_only_the_reader_who_consented(database_url: str) -> None:
    """ENG-1 per_person: the consented reader's token names their recipient row; the other
    reader of the same campaign is tracked as in aggregate, with no per-person token."""
    sent = await _send_on(database_url, "per_person", readers=2, consented=1)
    campaign_id, signer = sent["campaign_id"], sent["signer"]
    named = {}
    for address, parts in sent["mail"].items():
        if address == "tester@example.org":
            continue
        (token,) = {m[3] for part in parts.values() for m in TRACKED.finditer(part)}
        message = signer.read_message(campaign_id, token)
        assert message is not None
        named[address] = message.recipient_id
    (consenting,) = sent["consenting"]
    assert named == {
        address: sent["recipient_of"][address] if address == consenting else None
        for address in sent["recipient_of"]
    }
    assert named[consenting] is not None


async def test_the_batch_provider_path_carries_each_message_token_as_a_recipient_variable(
    database_url: str, dev_provider: DevProviderServer
) -> None:
    """PRV-2: one provider call per batch, yet every reader's tracked links carry their own
    message's token, substituted by the provider in both parts like the unsubscribe token."""
    settings = batch_provider_settings(database_url, dev_provider.base_url)
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers, tracking="aggregate")
        await seed(container, "weekly", 4)
        created = await client.post(
            "/api/admin/campaigns",
            json={"newsletter": "weekly", "subject": "Issue 1", "body": BODY},
            headers=headers,
        )
        campaign_id = int(created.json()["id"])
        sent = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        assert sent.status_code == 202, sent.text
        async with running(container, registry(container)):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        signer = TrackingSigner(container.site_secret())
    keys = set()
    for recipient in dev_provider.store.recipients:
        html, text = recipient.html(), recipient.text()
        assert "%recipient" not in html + text
        tokens = {m[3] for part in (html, text) for m in TRACKED.finditer(part)}
        assert len(tokens) == 1
        assert len(list(TRACKED.finditer(text))) >= 2  # the story and the button
        message = signer.read_message(campaign_id, tokens.pop())
        assert message is not None
        assert message.recipient_id is None
        keys.add(message.message_key)
    assert len(keys) == 4


async def _send_on(database_url: str, mode: str, readers: int, consented: int = 0) -> Any:
    """Newsletter `weekly` (archive on) tracking in `mode`, `readers` readers (the first
    `consented` of them with recorded tracking consent), a campaign sent through SMTP to the
    sink, after a test send to tester@example.org. What the sink and the database hold."""
    async with SmtpSink(clock=utcnow, port=0) as sink:
        settings = sink_settings(database_url, sink)
        return await _run(settings, sink, mode, readers, consented)
