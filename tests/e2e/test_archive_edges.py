"""Edges of the public archive and of content sanitisation (issue 35 item 11): what the outside
review found answering wrongly. A control character in a newsletter's description made its
feeds a 500; archive pages carried no Content-Security-Policy, nosniff or framing policy; and
scheme-less or relative URLs (`//evil.example/x`, `x`) survived sanitisation into the mail and
the archive."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from email import message_from_bytes

import feedparser
import httpx
import pytest
from lxml import etree
from sqlalchemy import select, update

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.sending import FAST_QUEUE, seed, wait_for_campaign_status, workers
from tidings.bootstrap import Container
from tidings.storage.tables import captured_messages, newsletters

SITE = {"public_url": "https://news.example.org"}
MARKDOWN = (
    "[far](//evil.example/x) [near](x) [fine](https://ok.example/a) [write](mailto:ed@ok.example)"
    "\n\n![pixel](//evil.example/i.png)\n\n[Leave]({{ unsubscribe_url }})\n"
)
HTML = (
    '<p><a href="//evil.example/x">far</a> <a href="x">near</a> '
    '<a href="/root">rooted</a> <a href="https://ok.example/a">fine</a> '
    '<a href="mailto:ed@ok.example">write</a> <img src="//evil.example/i.png" alt="pixel"> '
    '<img src="https://ok.example/i.png" alt="ok"> <a href="{{ unsubscribe_url }}">Leave</a></p>'
)
Sent = tuple[httpx.AsyncClient, Container, dict[str, int]]


@pytest.fixture
async def sent(database_url: str) -> AsyncIterator[Sent]:
    """`weekly`, archive on, one Markdown and one HTML issue with every kind of URL, sent."""
    settings = make_settings(database_url, queue=FAST_QUEUE, site=SITE)
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers, archive=True)
        await seed(container, "weekly", 2)
        ids = {}
        for body_format, body in (("markdown", MARKDOWN), ("html", HTML)):
            draft = {"newsletter": "weekly", "subject": body_format, "body": body}
            created = await client.post(
                "/api/admin/campaigns", json={**draft, "body_format": body_format}, headers=headers
            )
            assert created.status_code == 201, created.text
            ids[body_format] = int(created.json()["id"])
            await client.post(f"/api/admin/campaigns/{ids[body_format]}/send", headers=headers)
        async with workers(container):
            for campaign_id in ids.values():
                assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        yield client, container, ids


def _urls(html: str) -> set[str]:
    return set(re.findall(r'(?:href|src)="([^"]*)"', html))


async def _mail_html(container: Container) -> dict[str, str]:
    async with container.db.read() as conn:
        raw = [row.raw for row in await conn.execute(select(captured_messages.c.raw))]
    found = {}
    for data in raw:
        message = message_from_bytes(data)
        for part in message.walk():
            if part.get_content_type() == "text/html":
                payload = part.get_payload(decode=True)
                assert isinstance(payload, bytes)
                found[str(message["Subject"])] = payload.decode()
    return found


async def test_relative_and_scheme_less_urls_never_reach_mail_or_archive(sent: Sent) -> None:
    """A scheme-less link goes wherever its viewer's scheme takes it, and a relative one
    resolves against the archive's own site: neither belongs in an issue. Absolute links,
    mail links and the product's own unsubscribe link keep working."""
    client, container, ids = sent
    mail = await _mail_html(container)
    for body_format, campaign_id in ids.items():
        page = (await client.get(f"/archive/weekly/{campaign_id}")).text
        for where, html in (("mail", mail[body_format]), ("archive", page)):
            urls = _urls(html)
            assert not {url for url in urls if "evil.example" in url}, (body_format, where)
            assert not urls & {"x", "/root"}, (body_format, where)
            assert "https://ok.example/a" in urls, (body_format, where)
            assert "mailto:ed@ok.example" in urls, (body_format, where)
            assert "far" in html, (body_format, where)  # the text stays, the link goes
        assert any(
            url.startswith("https://news.example.org/unsubscribe/")
            for url in _urls(mail[body_format])
        )
        assert "https://news.example.org/subscribe/weekly" in _urls(page)  # the archive's stand-in
    assert "https://ok.example/i.png" in _urls(mail["html"])


async def test_archive_answers_carry_a_content_policy_nosniff_and_no_framing(sent: Sent) -> None:
    """Authors' content is served from the site's own origin: a policy must keep anything
    that got through from running, from being sniffed into another type, or from being
    framed by another site."""
    client, _, ids = sent
    paths = [
        "/archive/weekly",
        f"/archive/weekly/{ids['html']}",
        "/archive/weekly/feed.atom",
        "/archive/weekly/feed.rss",
        "/archive/weekly/999999",  # the not-found page too
    ]
    for path in paths:
        response = await client.get(path)
        policy = response.headers.get("content-security-policy", "")
        assert "default-src 'none'" in policy, path
        assert "frame-ancestors 'none'" in policy, path
        assert "script-src" not in policy, path
        assert response.headers.get("x-content-type-options") == "nosniff", path
        assert response.headers.get("x-frame-options") == "DENY", path


@pytest.mark.parametrize("control", ["\x0b", "\x1f", "\x08"])
async def test_a_control_character_in_the_description_never_breaks_the_feeds(
    sent: Sent, control: str
) -> None:
    """One stray character pasted into a description must not take every reader's feed
    down with a 500: the feed leaves it out and stays well-formed XML."""
    client, container, _ = sent
    async with container.db.write() as conn:
        await conn.execute(
            update(newsletters)
            .where(newsletters.c.slug == "weekly")
            .values(description=f"Notes{control}and news", name=f"The{control} Weekly")
        )
    for kind in ("atom", "rss"):
        response = await client.get(f"/archive/weekly/feed.{kind}")
        assert response.status_code == 200, kind
        etree.fromstring(response.content)  # well-formed, or it raises
        parsed = feedparser.parse(response.content)
        assert parsed.bozo == 0, parsed.get("bozo_exception")
        assert "Notesand news" in response.text
    assert (await client.get("/archive/weekly")).status_code == 200
