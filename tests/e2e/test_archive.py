"""The public archive of sent issues and its feeds (API-4): what anyone on the web can read."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from email import message_from_bytes
from email.message import Message
from typing import Any

import feedparser
import httpx
import pytest
from sqlalchemy import select

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.cli import clean_env, tidings
from tests.support.sending import FAST_QUEUE, seed, wait_for_campaign_status, workers
from tidings.bootstrap import Container
from tidings.storage.tables import captured_messages

BODY = (
    'Hello {{ name | fallback: "friend" }}, this went to {{ email }}.\n\n'
    "::: only paid\nMembers only.\n:::\n\n"
    "[Leave]({{ unsubscribe_url }}) or [choose]({{ preferences_url }}).\n"
)
SITE = {"public_url": "https://news.example.org"}


@pytest.fixture
async def sent(database_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, Container, int]]:
    """Newsletter `weekly` with its archive on, and one issue sent to four readers."""
    settings = make_settings(database_url, queue=FAST_QUEUE, site=SITE)
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers, archive=True, description="News & notes.")
        await seed(container, "weekly", 4)
        body = {
            "newsletter": "weekly",
            "subject": "Issue <1>",
            "preheader": "A first look",
            "body": BODY,
        }
        response = await client.post("/api/admin/campaigns", json=body, headers=headers)
        campaign_id = int(response.json()["id"])
        draft = await client.post(
            "/api/admin/campaigns", json={**body, "subject": "Draft"}, headers=headers
        )
        assert draft.status_code == 201
        await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        yield client, container, campaign_id


async def _mail(container: Container) -> list[Message]:
    async with container.db.read() as conn:
        rows = await conn.execute(select(captured_messages.c.raw))
        return [message_from_bytes(row.raw) for row in rows]


def _part(message: Message, subtype: str) -> str:
    for part in message.walk():
        if part.get_content_type() == f"text/{subtype}":
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)
            return payload.decode()
    raise AssertionError(f"no text/{subtype} part")


async def test_issue_page_shows_the_free_edition_to_nobody_in_particular(sent: Any) -> None:
    """A public page must never carry a reader's data or a working token, nor paid content."""
    client, container, campaign_id = sent
    page = await client.get(f"/archive/weekly/{campaign_id}")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    assert "Hello friend, this went to ." in html
    assert "Issue &lt;1&gt;" in html
    assert "Members only" not in html
    assert "/unsubscribe/" not in html
    assert "/preferences/" not in html
    assert html.count('href="https://news.example.org/subscribe/weekly"') >= 3
    assert "@" not in html.replace("@media", "")
    assert 'name="viewport" content="width=device-width' in html
    # What readers were sent did carry their own links: the archive is not the mail.
    mail = await _mail(container)
    assert len(mail) == 4
    assert all("/unsubscribe/" in _part(message, "html") for message in mail)


async def test_mail_links_to_its_issue_page_when_the_archive_is_on(sent: Any) -> None:
    """ "View in your browser" must point at the stable page of the very issue received."""
    _, container, campaign_id = sent
    url = f"https://news.example.org/archive/weekly/{campaign_id}"
    for message in await _mail(container):
        assert f'href="{url}"' in _part(message, "html")
        assert f"View in your browser: {url}" in _part(message, "plain")


async def test_index_lists_sent_issues_only_and_links_the_feeds(sent: Any) -> None:
    """Drafts are private; the index shows what went out and where to follow it."""
    client, _, campaign_id = sent
    page = await client.get("/archive/weekly")
    assert page.status_code == 200
    links = re.findall(r'href="([^"]+)"', page.text)
    assert f"https://news.example.org/archive/weekly/{campaign_id}" in links
    assert "https://news.example.org/archive/weekly/feed.atom" in links
    assert "https://news.example.org/archive/weekly/feed.rss" in links
    assert 'type="application/atom+xml"' in page.text
    assert "Draft" not in page.text
    assert "News &amp; notes." in page.text


@pytest.mark.parametrize("kind", ["atom", "rss"])
async def test_feeds_parse_cleanly_with_the_issue_in_full(sent: Any, kind: str) -> None:
    """Feed readers must read the feed without errors and find the issue's text in it."""
    client, _, campaign_id = sent
    response = await client.get(f"/archive/weekly/feed.{kind}")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith(f"application/{kind}+xml")
    parsed = feedparser.parse(response.content)
    assert parsed.bozo == 0, parsed.get("bozo_exception")
    assert parsed.version == ("atom10" if kind == "atom" else "rss20")
    assert parsed.feed.title == "The Weekly"
    (entry,) = parsed.entries
    assert entry.link == f"https://news.example.org/archive/weekly/{campaign_id}"
    assert entry.title == "Issue <1>"
    content = entry.content[0].value
    assert "Hello friend" in content
    assert "Members only" not in content
    assert "/unsubscribe/" not in content


async def test_archive_pages_can_be_cached_and_revalidated(sent: Any) -> None:
    """Public pages are the same for everyone: caches may keep them and ask cheaply again."""
    client, _, campaign_id = sent
    for path in ("/archive/weekly", f"/archive/weekly/{campaign_id}", "/archive/weekly/feed.atom"):
        first = await client.get(path)
        assert first.headers["cache-control"] == "public, max-age=300"
        assert first.headers["last-modified"].endswith("GMT")
        again = await client.get(path, headers={"If-None-Match": first.headers["etag"]})
        assert again.status_code == 304
        assert again.content == b""


async def test_archive_is_off_until_the_owner_turns_it_on(database_url: str) -> None:
    """Publishing is the owner's choice: without it every archive address is not found."""
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        created = await create_newsletter(client, headers)
        assert created["archive"] is False
        for path in ("/archive/weekly/feed.atom", "/archive/weekly/feed.rss"):
            response = await client.get(path)
            assert response.status_code == 404, path
            assert response.headers["content-type"] == "application/problem+json"
        # What a person opens is a page that says so, in the site's design, not JSON.
        for path in ("/archive/weekly", "/archive/weekly/1", "/archive/nothing"):
            response = await client.get(path)
            assert response.status_code == 404, path
            assert response.headers["content-type"].startswith("text/html"), path
            assert "There is no archive at this address." in response.text
            assert 'href="/subscribe"' in response.text
        turned_on = await client.patch(
            "/api/admin/newsletters/weekly", json={"archive": True}, headers=headers
        )
        assert turned_on.json()["archive"] is True
        assert (await client.get("/archive/weekly")).status_code == 200
        missing_issue = await client.get("/archive/weekly/1")
        assert missing_issue.status_code == 404
        assert "There is no issue at this address." in missing_issue.text
        # A mangled link is a page that says so too, never a JSON validation error.
        for mangled in (
            "/archive/weekly/not-a-number",
            "/archive/weekly/0",
            "/archive/weekly/-1",
            "/archive/weekly/99999999999999999999999",
            "/archive/" + "w" * 65,
            "/archive/Weekly",
        ):
            bad = await client.get(mangled)
            assert bad.status_code == 404, mangled
            assert bad.headers["content-type"].startswith("text/html"), mangled
        for mangled in ("/archive/x_y/feed.atom", "/archive/" + "w" * 65 + "/feed.rss"):
            assert (await client.get(mangled)).status_code == 404, mangled


def test_cli_turns_the_archive_on_and_off(database_url: str) -> None:
    """Operators without the API publish and unpublish from the command line."""
    env = clean_env(
        DATABASE_URL=database_url, LOG_FORMAT="json", SITE_PUBLIC_URL=SITE["public_url"]
    )
    assert tidings("migrate", env=env).returncode == 0
    options = ["--sender-name", "Ed", "--sender-address", "ed@example.org", "--archive", "--name"]
    created = tidings("newsletters", "create", "weekly", *options, "The Weekly", env=env)
    assert created.returncode == 0, created.stderr
    listed = tidings("newsletters", "archive", "weekly", env=env)
    assert "archive on at https://news.example.org/archive/weekly" in listed.stdout
    off = tidings("newsletters", "archive", "weekly", "--off", env=env)
    assert off.returncode == 0
    assert "archive off" in off.stdout
    unknown = tidings("newsletters", "archive", "nope", env=env)
    assert unknown.returncode != 0
    assert "nope" in unknown.stderr
