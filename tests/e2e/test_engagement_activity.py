"""A person's activity (ENG-6): their opens and clicks, with consent and per-person tracking,
in one timeline with their bounces and unsubscribes — on their page, in the API and in
`tidings subscribers show --json` —; in their privacy export; gone with a privacy delete; and
deleted after `tracking.retention_days` without changing a campaign's figures."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from tests.factories import admin_headers, make_settings
from tests.support import rows
from tests.support.admin_ui import signed_in, ui_app
from tests.support.cli import tidings_cli
from tests.support.clock import Clock
from tests.support.engagement_rows import Counted, add_counters, add_links
from tests.support.person_hits import add_notice, add_person_hit, add_sent_recipient
from tests.support.sending import FAST_QUEUE, workers
from tests.support.waiting import wait_for
from tidings.bootstrap import Container
from tidings.storage.campaign_links import StoredLink
from tidings.storage.tables import (
    engagement_counters,
    engagement_notices,
    engagement_person_hits,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SENT = NOW - timedelta(days=2)
URL = "https://example.com/spring-sale"
EMAIL = "ann@example.org"


@dataclass
class Site:
    http: httpx.AsyncClient
    container: Container
    headers: dict[str, str]
    clock: Clock
    database_url: str
    subscriber_id: int
    campaign_id: int


@pytest.fixture
async def site(database_url: str) -> AsyncIterator[Site]:
    """A per_person newsletter, a consented subscriber, a sent campaign with one link, its
    counters, and the person's open, click and a scanner's click; they unsubscribed after."""
    clock = Clock(NOW)
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with ui_app(settings, clock=clock) as (client, container):
        http = client()
        headers = await admin_headers(container)
        made = await http.post(
            "/api/admin/subscribers",
            json={"email": EMAIL, "tracking_consent": True},
            headers=headers,
        )
        assert made.status_code == 201, made.text
        subscriber_id = made.json()["id"]
        async with container.db.write() as conn:
            newsletter_id = await rows.newsletter(conn, slug="weekly", tracking="per_person")
            campaign_id = await rows.campaign(
                conn, newsletter_id, subject="Spring issue", status="submitted"
            )
            await add_links(conn, campaign_id, "all", StoredLink(1, URL))
            await add_counters(
                conn,
                campaign_id,
                Counted("all", 0, "open", 1, 1, 0),
                Counted("all", 1, "click", 1, 1, 1),
            )
            await add_sent_recipient(
                conn, campaign_id, subscriber_id, SENT, unsubscribed_at=SENT + timedelta(hours=5)
            )
            await add_person_hit(
                conn, campaign_id, subscriber_id, SENT + timedelta(seconds=2), verdict="machine",
                reason="soon_after_send", client_family="scanner",
            )  # fmt: skip
            await add_person_hit(conn, campaign_id, subscriber_id, SENT + timedelta(hours=1),
                                 kind="open", number=0)  # fmt: skip
            await add_person_hit(conn, campaign_id, subscriber_id, SENT + timedelta(hours=2))
            await add_notice(conn, campaign_id, subscriber_id, SENT + timedelta(hours=2))
        yield Site(http, container, headers, clock, database_url, subscriber_id, campaign_id)


EXPECTED = [  # newest first: (kind, url, verdict)
    ("unsubscribe", None, None),
    ("click", URL, "human"),
    ("open", None, "human"),
    ("click", URL, "machine"),
]


def _timeline(entries: list[dict[str, Any]]) -> list[tuple[str, str | None, str | None]]:
    return [(e["kind"], e["url"], e["verdict"]) for e in entries]


async def _count(site: Site, table: Any) -> int:
    async with site.container.db.read() as conn:
        query = select(func.count()).select_from(table)
        return int((await conn.execute(query)).scalar_one())


async def _counters(site: Site) -> list[tuple[Any, ...]]:
    async with site.container.db.read() as conn:
        query = select(engagement_counters).order_by(engagement_counters.c.number)
        return [tuple(row) for row in await conn.execute(query)]


async def test_subscribers_show_json_lists_the_timeline_newest_first(site: Site) -> None:
    """An operator answering "did this reader get and open our mail?" needs their hits and
    their bounces and unsubscribes in one order, with machines marked as such."""
    shown = tidings_cli(site.database_url)("subscribers", "show", EMAIL, "--json")
    assert shown.returncode == 0, shown.stderr
    body = json.loads(shown.stdout)
    assert _timeline(body["activity"]) == EXPECTED
    click = body["activity"][1]
    assert (click["campaign"], click["campaign_id"]) == ("Spring issue", site.campaign_id)
    assert body["activity"][3]["reason"] == "soon_after_send"
    assert body["tracking_consent_source"] == "api"


async def test_subscribers_show_prints_the_consent_and_the_timeline(site: Site) -> None:
    """At a terminal the same facts must be readable without JSON."""
    shown = tidings_cli(site.database_url)("subscribers", "show", EMAIL)
    assert shown.returncode == 0, shown.stderr
    assert f"Open and click tracking: agreed {NOW.isoformat()} (api)" in shown.stdout
    assert "soon_after_send" not in shown.stdout  # the table shows the verdict, not the rule
    assert "machine" in shown.stdout
    assert "unsubscribe" in shown.stdout


async def test_admin_api_and_person_page_show_the_same_timeline(site: Site) -> None:
    """The API and the page read the one use case, so neither can drift from the CLI."""
    answer = await site.http.get(
        f"/api/admin/subscribers/{site.subscriber_id}/activity", headers=site.headers
    )
    assert answer.status_code == 200
    assert _timeline(answer.json()) == EXPECTED
    unknown = await site.http.get("/api/admin/subscribers/999999/activity", headers=site.headers)
    assert unknown.status_code == 404
    await signed_in(site.http, site.container)
    page = await site.http.get(f"/admin/subscribers/{site.subscriber_id}")
    assert page.status_code == 200
    activity = page.text[page.text.index("<h2>Activity</h2>") :]
    assert URL in activity
    assert "machine (soon_after_send)" in activity
    assert "unsubscribe" in activity
    assert "agreed" in page.text


async def test_privacy_export_holds_the_consent_and_every_hit(site: Site) -> None:
    """A person asking what is kept about them must get their consent record and each hit."""
    exported = await site.http.get(
        f"/api/admin/subscribers/{site.subscriber_id}/export", headers=site.headers
    )
    assert exported.status_code == 200
    body = exported.json()
    assert body["tracking_consent"]["source"] == "api"
    assert body["tracking_consent"]["at"] == NOW.isoformat()
    hits = body["engagement_hits"]
    assert [(h["kind"], h["url"], h["verdict"]) for h in hits] == [
        (kind, url, verdict) for kind, url, verdict in EXPECTED if kind != "unsubscribe"
    ]
    assert hits[0]["at"] == (SENT + timedelta(hours=2)).isoformat()


async def test_privacy_delete_leaves_no_hit_or_notice_and_keeps_the_counts(site: Site) -> None:
    """After an erasure nothing may tie a hit to the person, yet the campaign's figures, which
    never named anyone, must not change."""
    before = await _counters(site)
    async with site.container.db.write() as conn:
        other = await rows.subscriber(conn, email="bo@example.org")
        await add_person_hit(conn, site.campaign_id, other, SENT + timedelta(hours=3))
    deleted = await site.http.delete(
        f"/api/admin/subscribers/{site.subscriber_id}", headers=site.headers
    )
    assert deleted.status_code == 204
    async with site.container.db.read() as conn:
        left = list((await conn.execute(select(engagement_person_hits.c.subscriber_id))).scalars())
    assert left == [other]
    assert await _count(site, engagement_notices) == 0
    assert await _counters(site) == before


async def test_retention_purge_deletes_old_person_hits_and_changes_no_figure(
    site: Site,
) -> None:
    """Per-person hits are kept for tracking.retention_days and no longer; the counters
    already hold them, so the campaign's results stay as they were."""
    before = await _counters(site)
    async with site.container.db.write() as conn:
        old = NOW - timedelta(days=400)
        await add_person_hit(conn, site.campaign_id, site.subscriber_id, old)
        await add_person_hit(conn, site.campaign_id, site.subscriber_id, old, kind="open")
    assert await _count(site, engagement_person_hits) == 5

    async def purged() -> bool:
        return await _count(site, engagement_person_hits) == 3

    async with workers(site.container):  # the purge is one of the workers' maintenance tasks
        await wait_for(purged, message="the workers never purged the old person hits")
    async with site.container.db.read() as conn:
        kept = list((await conn.execute(select(engagement_person_hits.c.at))).scalars())
    assert min(kept) > NOW - timedelta(days=395)
    assert await _counters(site) == before
    assert await site.container.activity.purge() == 0  # nothing more to purge


async def test_withdrawing_consent_deletes_what_was_recorded_under_it(site: Site) -> None:
    """Once the person says no, keeping their per-person activity has no ground left; the
    campaign's counts, which never named them, stay."""
    before = await _counters(site)
    withdrawn = await site.http.patch(
        f"/api/admin/subscribers/{site.subscriber_id}",
        json={"tracking_consent": False},
        headers=site.headers,
    )
    assert withdrawn.status_code == 200
    assert await _count(site, engagement_person_hits) == 0
    assert await _counters(site) == before
    answer = await site.http.get(
        f"/api/admin/subscribers/{site.subscriber_id}/activity", headers=site.headers
    )
    assert _timeline(answer.json()) == [("unsubscribe", None, None)]  # not a tracked fact
