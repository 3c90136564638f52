"""Paid issues stay paid (issue 35 item 3, API-4): an issue sent to a filtered audience is not
published in the archive or its feeds unless the operator says so, and paid-only passages
never are. Mirrors the outside review's reproduction: a campaign sent with `tier:paid`
appeared in full at /archive/{slug} and in its RSS/Atom feed."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import feedparser
import httpx
import pytest
from sqlalchemy import select

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.admin_ui import DRAFT, composed_campaign, signed_in, ui_app
from tests.support.cli import clean_env, tidings
from tests.support.sending import FAST_QUEUE, seed, wait_for_campaign_status, workers
from tests.support.waiting import wait_for
from tidings.audience.newsletters import NewsletterChanges
from tidings.bootstrap import Container
from tidings.storage.tables import captured_messages

SITE = {"public_url": "https://news.example.org"}
# Each campaign's subject names it; its paid passage must never reach the public.
BODY = "Open to all: {subject}.\n\n::: only paid\nPaid passage of {subject}.\n:::\n"
AUDIENCES = {"Everyone": "", "Paid": "tier:paid", "Beta": "label:beta"}

Sent = tuple[httpx.AsyncClient, Container, dict[str, str], dict[str, int]]


@pytest.fixture
async def sent(database_url: str) -> AsyncIterator[Sent]:
    """Newsletter `weekly` with its archive on and three issues sent: to everyone, to
    `tier:paid` and to `label:beta`, none marked public or private by anyone."""
    settings = make_settings(database_url, queue=FAST_QUEUE, site=SITE)
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers, archive=True)
        await seed(container, "weekly", 10)  # free and paid; every fifth labelled beta
        ids: dict[str, int] = {}
        for subject, audience in AUDIENCES.items():
            body = {
                "newsletter": "weekly",
                "subject": subject,
                "body": BODY.format(subject=subject),
                "audience_filter": audience,
            }
            created = await client.post("/api/admin/campaigns", json=body, headers=headers)
            assert created.status_code == 201, created.text
            ids[subject] = int(created.json()["id"])
            sent = await client.post(f"/api/admin/campaigns/{ids[subject]}/send", headers=headers)
            assert sent.status_code == 202, sent.text
        async with workers(container):
            for campaign_id in ids.values():
                assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        yield client, container, headers, ids


async def _feed(client: httpx.AsyncClient, kind: str) -> tuple[set[str], str]:
    """The titles of a feed's entries, and the feed as text."""
    response = await client.get(f"/archive/weekly/feed.{kind}")
    assert response.status_code == 200
    parsed = feedparser.parse(response.content)
    assert parsed.bozo == 0, parsed.get("bozo_exception")
    return {entry.title for entry in parsed.entries}, response.text


async def _public(client: httpx.AsyncClient, ids: dict[str, int]) -> dict[str, Any]:
    """What anyone can read of each issue: its page, and whether the index and feeds list it."""
    index = (await client.get("/archive/weekly")).text
    atom, atom_text = await _feed(client, "atom")
    rss, rss_text = await _feed(client, "rss")
    seen: dict[str, Any] = {}
    for subject, campaign_id in ids.items():
        page = await client.get(f"/archive/weekly/{campaign_id}")
        seen[subject] = {
            "page": page.status_code,
            "page_html": page.headers["content-type"].startswith("text/html"),
            "index": f"/archive/weekly/{campaign_id}" in index,
            "atom": subject in atom,
            "rss": subject in rss,
        }
    seen["leaked"] = [text for text in (index, atom_text, rss_text) if "Paid passage" in text]
    return seen


async def test_filtered_issues_stay_out_of_the_archive_and_feeds(sent: Sent) -> None:
    """An issue for paid readers (or a label) published for free gives away what they pay for:
    only an unfiltered issue is public unless the operator decides otherwise."""
    client, _, headers, ids = sent
    seen = await _public(client, ids)
    assert seen["Everyone"] == {
        "page": 200,
        "page_html": True,
        "index": True,
        "atom": True,
        "rss": True,
    }
    for filtered in ("Paid", "Beta"):
        # The issue's own address is a page saying it is not there, not JSON.
        assert seen[filtered] == {
            "page": 404,
            "page_html": True,
            "index": False,
            "atom": False,
            "rss": False,
        }, filtered
    assert seen["leaked"] == []
    listed = await client.get(f"/api/admin/campaigns/{ids['Paid']}", headers=headers)
    assert listed.json()["archive_public"] is False
    listed = await client.get(f"/api/admin/campaigns/{ids['Everyone']}", headers=headers)
    assert listed.json()["archive_public"] is True


async def test_operator_publishes_a_paid_issue_without_its_paid_passages(sent: Sent) -> None:
    """Publishing a sent paid issue is the operator's call; even then the archive shows the
    free edition, so a paid-only passage never appears."""
    client, container, headers, ids = sent
    before = parsedate_to_datetime((await client.get("/archive/weekly")).headers["last-modified"])

    async def a_second_later() -> bool:  # Last-Modified counts whole seconds
        return datetime.now(UTC) >= before + timedelta(seconds=1)

    await wait_for(a_second_later)
    for subject in ("Paid", "Beta"):
        marked = await client.patch(
            f"/api/admin/campaigns/{ids[subject]}", json={"archive_public": True}, headers=headers
        )
        assert marked.status_code == 200, marked.text
        assert marked.json()["archive_public"] is True
        assert marked.json()["status"] == "submitted"
    seen = await _public(client, ids)
    # Caches must learn that the index changed, though no issue was sent since.
    index = await client.get("/archive/weekly")
    assert parsedate_to_datetime(index.headers["last-modified"]) > before
    for subject in AUDIENCES:
        assert seen[subject]["page"] == 200, subject
        assert (seen[subject]["index"], seen[subject]["atom"], seen[subject]["rss"]) == (
            True,
            True,
            True,
        ), subject
    page = (await client.get(f"/archive/weekly/{ids['Paid']}")).text
    assert "Open to all: Paid." in page
    assert "Paid passage" not in page
    assert seen["leaked"] == []
    # And withdrawn again, it is gone from every public address.
    await client.patch(
        f"/api/admin/campaigns/{ids['Paid']}", json={"archive_public": False}, headers=headers
    )
    assert (await client.get(f"/archive/weekly/{ids['Paid']}")).status_code == 404
    assert "Paid" not in (await _feed(client, "atom"))[0]
    # Each decision is in the audit log, with who took it.
    decisions = await container.audit.list(action="campaign.archive")
    made = sorted((entry.target, (entry.detail or {})["public"]) for entry in decisions)
    expected = [(f"campaign:{ids['Beta']}", True), (f"campaign:{ids['Paid']}", True)]
    assert made == sorted([*expected, (f"campaign:{ids['Paid']}", False)])
    assert all(entry.actor.startswith("key:") for entry in decisions)


async def test_mail_of_a_private_issue_has_no_browser_link(sent: Sent) -> None:
    """ "View in your browser" must not point paid readers at an address that answers 404."""
    _, container, _, _ = sent
    async with container.db.read() as conn:
        raw = [row.raw for row in await conn.execute(select(captured_messages.c.raw))]
    links: dict[str, bool] = {}
    for data in raw:
        message = message_from_bytes(data)
        subject = str(message["Subject"])
        links[subject] = links.get(subject, False) or b"/archive/weekly/" in data
    assert links == {"Everyone": True, "Paid": False, "Beta": False}


async def test_archive_flag_follows_the_audience_until_the_operator_decides(
    database_url: str,
) -> None:
    """Narrowing a draft to paid readers must take it out of the archive by itself; an
    explicit choice in the same or a later edit is kept."""
    settings = make_settings(database_url, queue=FAST_QUEUE, site=SITE)
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers, archive=True)
        body = {"newsletter": "weekly", "subject": "S", "body": "Hi."}
        created = (await client.post("/api/admin/campaigns", json=body, headers=headers)).json()
        assert created["archive_public"] is True
        url = f"/api/admin/campaigns/{created['id']}"

        async def edit(**change: Any) -> Any:
            response = await client.patch(url, json=change, headers=headers)
            assert response.status_code == 200, response.text
            return response.json()["archive_public"]

        assert await edit(audience_filter="tier:paid") is False
        assert await edit(subject="Still paid") is False
        assert await edit(archive_public=True) is True
        assert await edit(audience_filter="tier:paid") is True  # the same audience
        assert await edit(audience_filter="attr:city=Paris") is False
        assert await edit(audience_filter="label:beta", archive_public=True) is True
        assert await edit(audience_filter="") is True
        refused = await client.patch(url, json={"archive_public": None}, headers=headers)
        assert refused.status_code == 422
        assert "archive_public" in refused.text
        paid = {**body, "audience_filter": "tier:paid", "archive_public": True}
        chosen = (await client.post("/api/admin/campaigns", json=paid, headers=headers)).json()
        assert chosen["archive_public"] is True
        cloned = await client.post(f"/api/admin/campaigns/{chosen['id']}/clone", headers=headers)
        assert cloned.json()["archive_public"] is True


def test_cli_shows_and_sets_the_archive_flag(database_url: str, tmp_path: Path) -> None:
    """Operators who work from the command line see whether an issue will be published and
    decide it, at creation and later."""
    env = clean_env(DATABASE_URL=database_url, SITE_PUBLIC_URL=SITE["public_url"])
    assert tidings("migrate", env=env).returncode == 0
    options = ["--sender-name", "Ed", "--sender-address", "ed@example.org", "--archive"]
    created = tidings("newsletters", "create", "weekly", *options, "--name", "W", env=env)
    assert created.returncode == 0, created.stderr
    body = tmp_path / "issue.md"
    body.write_text("Hello.\n", encoding="utf-8")
    base = ["campaign", "create", "-n", "weekly", "-s", "Paid", "-f", str(body), "--json"]
    paid = tidings(*base, "--audience", "tier:paid", env=env)
    assert paid.returncode == 0, paid.stderr
    shown = json.loads(paid.stdout)
    assert shown["archive_public"] is False
    chosen = tidings(*base, "--audience", "tier:paid", "--archive", env=env)
    assert json.loads(chosen.stdout)["archive_public"] is True
    everyone = tidings(*base, "--no-archive", env=env)
    assert json.loads(everyone.stdout)["archive_public"] is False
    edited = tidings("campaign", "edit", str(shown["id"]), "--archive", env=env)
    assert edited.returncode == 0, edited.stderr
    assert "archive: public" in edited.stdout
    audit = tidings("audit", "list", "--action", "campaign.archive", env=env)
    assert audit.stdout.count("campaign.archive") == 3, audit.stdout


async def test_editor_and_sent_page_show_and_set_the_archive_flag(database_url: str) -> None:
    """Operators in the browser must see whether an issue will be published, have a new
    filter decide it while they leave the box alone, and publish a sent issue later."""
    settings = make_settings(database_url, queue=FAST_QUEUE, site=SITE)
    async with ui_app(settings) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        url, campaign_id = await composed_campaign(client, container, csrf, 2)
        await container.newsletters.update("weekly", NewsletterChanges(archive=True))
        editor = (await client.get(url)).text
        assert re.search(r'name="archive_public" type="checkbox" value="on" checked', editor)
        assert 'name="archive_public_shown" value="1"' in editor

        async def autosave(audience: str, *, ticked: bool, shown: str) -> bool:
            form = {**DRAFT, "audience_filter": audience, "csrf_token": csrf}
            form |= {"archive_public_shown": shown} | ({"archive_public": "on"} if ticked else {})
            answer = await client.post(url, data=form, headers={"Accept": "application/json"})
            assert answer.status_code == 200, answer.text
            return bool(answer.json()["archive_public"])

        # The box left as shown (ticked) while the filter becomes tier:paid: not public.
        assert await autosave("tier:paid", ticked=True, shown="1") is False
        assert await autosave("tier:paid", ticked=False, shown="0") is False
        assert await autosave("tier:paid", ticked=True, shown="0") is True  # the operator's
        assert await autosave("tier:paid", ticked=True, shown="1") is True
        assert 'name="archive_public_shown" value="1"' in (await client.get(url)).text
        unticked = await autosave("", ticked=False, shown="1")
        assert unticked is False  # an explicit "no" with an empty filter is kept too
        await client.post(url + "/send", data={"csrf_token": csrf})
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        sent_page = (await client.get(url)).text
        assert "Not in the archive." in sent_page
        published = await client.post(url + "/archive", data={"public": "true", "csrf_token": csrf})
        assert published.status_code == 303
        assert "Withdraw from the archive" in (await client.get(url)).text
        assert (await client.get(f"/archive/weekly/{campaign_id}")).status_code == 200
        decisions = await container.audit.list(action="campaign.archive")
        # The two boxes the operator changed, then the button; not the boxes left alone.
        assert [(entry.detail or {})["public"] for entry in reversed(decisions)] == [
            True,
            False,
            True,
        ]
        assert all(entry.actor.startswith("admin:") for entry in decisions)
