"""Feed-to-email (AUT-2) through the admin API, the workers and the newsletter's page, with a
real feed server on loopback: new items become one digest and never a second one, nothing new
makes no campaign, a crash before the commit leaves neither items nor campaign, the workers
read a due feed once on its schedule in the site's zone, `send` mode sends, bad input is
refused with nothing changed, and a failing feed is named with its next try."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import func, select, text

from tests.factories import admin_headers, api_client, make_settings
from tests.support import rows
from tests.support.admin_ui import signed_in, ui_app
from tests.support.clock import Clock
from tests.support.feed_server import FeedServer, Item, Route, atom, feed_server, rss
from tests.support.sending import FAST_QUEUE, workers
from tests.support.waiting import wait_for
from tidings.bootstrap import Container, build
from tidings.storage.dialect import is_postgresql
from tidings.storage.tables import campaigns, feed_items, jobs, newsletter_feeds

# A Monday, 08:00 UTC: 10:00 in Paris (summer time, UTC+2).
NOW = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
LATER = NOW + timedelta(hours=1)
FEED_SETTINGS = {
    "queue": FAST_QUEUE,
    "webhooks": {"allow_private_networks": True},  # the feed server is on loopback
    "feeds": {"check_interval_seconds": 0.05, "timeout_seconds": 3, "max_bytes": 100_000},
    "site": {"timezone": "Europe/Paris"},
}


@dataclass
class Site:
    http: httpx.AsyncClient
    container: Container
    headers: dict[str, str]
    clock: Clock
    feeds: FeedServer

    async def follow(self, path: str, **body: str) -> httpx.Response:
        return await self.http.put(
            "/api/admin/newsletters/weekly/feed",
            json={"url": self.feeds.url(path), **body},
            headers=self.headers,
        )

    async def run(self) -> httpx.Response:
        return await self.http.post("/api/admin/newsletters/weekly/feed/run", headers=self.headers)

    async def count(self, table: object) -> int:
        async with self.container.db.read() as conn:
            return int((await conn.execute(select(func.count()).select_from(table))).scalar_one())  # type: ignore[arg-type]


@pytest.fixture
async def site(database_url: str) -> AsyncIterator[Site]:
    """The app on a test clock, a newsletter `weekly` with three confirmed readers, and an
    empty feed server."""
    clock = Clock(NOW)
    settings = make_settings(database_url, **FEED_SETTINGS)
    async with feed_server() as served, api_client(settings, clock=clock) as (http, container):
        async with container.db.write() as conn:
            newsletter_id = await rows.newsletter(conn, slug="weekly", name="Weekly")
            for number in range(3):
                person = await rows.subscriber(conn, email=f"reader{number}@example.org")
                await rows.subscription(
                    conn, person, newsletter_id, confirmed_at=NOW - timedelta(days=9)
                )
        yield Site(http, container, await admin_headers(container), clock, served)


def _posts(*numbers: int, at: datetime = LATER) -> list[Item]:
    return [
        Item(
            f"Post {number}",
            link=f"https://blog.example/{number}",
            guid=f"post-{number}",
            summary=f"<p>Summary {number} <script>steal()</script></p>",
            published=at + timedelta(minutes=number),
            image=f"https://blog.example/{number}.png" if number == 1 else None,
        )
        for number in numbers  # give them newest first, as feeds list them
    ]


async def test_new_items_become_one_draft_digest_and_never_a_second(site: Site) -> None:
    """The heart of AUT-2: the items not yet sent make a digest (title, summary sanitised,
    link, image); the next run makes none; a new item makes a digest of that item alone."""
    site.feeds.routes["/feed.xml"] = Route(
        rss([*_posts(2, 1), Item("Old", guid="old", published=NOW - timedelta(days=3))])
    )
    followed = await site.follow("/feed.xml", every="mon 09:00", mode="draft")
    assert followed.status_code == 200, followed.text
    shown = followed.json()
    assert (shown["every"], shown["mode"], shown["last_error"]) == ("mon 09:00", "draft", None)
    # Monday 09:00 in Paris is 07:00 UTC: today's has passed, so next Monday's.
    assert shown["next_run_at"] == "2026-06-08T07:00:00Z"

    site.clock.advance(timedelta(hours=2))
    ran = await site.run()
    assert ran.status_code == 200, ran.text
    first = ran.json()
    assert first["item_count"] == 2  # the item from before following is not news
    draft = await site.http.get(
        f"/api/admin/campaigns/{first['campaign_id']}", headers=site.headers
    )
    body = draft.json()
    assert draft.json()["status"] == "draft"
    assert body["subject"] == "Post 2 (and 1 more)"
    assert body["body"].index("Post 2") < body["body"].index("Post 1")
    assert "https://blog.example/1.png" in body["body"]
    assert "Summary 1" in body["body"]
    assert "steal()" not in body["body"]
    assert "Old" not in body["body"]

    again = (await site.run()).json()
    assert (again["campaign_id"], again["item_count"]) == (None, 0)

    site.feeds.routes["/feed.xml"] = Route(rss(_posts(3, 2, 1)))
    third = (await site.run()).json()
    assert third["item_count"] == 1
    newest = await site.http.get(
        f"/api/admin/campaigns/{third['campaign_id']}", headers=site.headers
    )
    assert newest.json()["subject"] == "Post 3"
    assert await site.count(campaigns) == 2
    assert third["feed"]["last_campaign_id"] == third["campaign_id"]
    assert [item["title"] for item in third["feed"]["recent_items"]] == [
        "Post 3",
        "Post 2",
        "Post 1",
    ]


async def test_an_unchanged_feed_costs_a_304_and_makes_no_campaign(site: Site) -> None:
    """Conditional requests: the stored ETag comes back, the server answers 304, and with
    nothing new there is no campaign; an Atom feed is followed the same way."""
    site.feeds.routes["/atom"] = Route(
        atom(_posts(1)), content_type="application/atom+xml", etag='"a1"'
    )
    assert (await site.follow("/atom")).status_code == 200
    first = (await site.run()).json()
    assert (first["item_count"], first["not_modified"]) == (1, False)
    second = (await site.run()).json()
    assert (second["campaign_id"], second["not_modified"]) == (None, True)
    _, headers = site.feeds.requests[-1]
    assert headers["if-none-match"] == '"a1"'
    assert await site.count(campaigns) == 1


@pytest.mark.parametrize(
    ("route", "body", "field", "message"),
    [
        (Route(b"<html><p>a blog</p></html>", content_type="text/html"), {}, "url", "not an RSS"),
        (Route(huge_bytes=1_000_000), {}, "url", "larger than feeds.max_bytes"),
        (
            Route(status=302, location="http://169.254.169.254/latest/"),
            {},
            "url",
            "redirected to a cloud metadata address",
        ),
        (Route(status=404), {}, "url", "HTTP 404"),
        (Route(rss(_posts(1))), {"every": "every week"}, "every", "days and a time"),
        (Route(rss(_posts(1))), {"every": "someday 09:00"}, "every", "'someday' is not a day"),
        (Route(rss(_posts(1))), {"every": "mon 25:00"}, "every", "not a time of day"),
        (Route(rss(_posts(1))), {"mode": "later"}, "mode", "draft"),
    ],
)
async def test_bad_feed_input_is_refused_and_changes_nothing(
    site: Site, route: Route, body: dict[str, str], field: str, message: str
) -> None:
    """Not XML, huge, a redirect to a forbidden address, an error, a schedule that does not
    parse, an unknown mode: a 422 naming the field and the reason, and no feed saved."""
    site.feeds.routes["/feed.xml"] = route
    answer = await site.follow("/feed.xml", **body)
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert problem["code"] == "invalid_input"
    assert message in answer.text
    assert field in answer.text
    assert await site.count(newsletter_feeds) == 0
    missing = await site.http.get("/api/admin/newsletters/weekly/feed", headers=site.headers)
    assert missing.status_code == 404


async def test_a_crash_before_the_commit_leaves_neither_items_nor_campaign(site: Site) -> None:
    """The never-twice guarantee across a crash: the write that records the feed's state is
    made to fail after the campaign and the items were written in the same transaction;
    none of them remain, and the next run makes the digest once."""
    site.feeds.routes["/feed.xml"] = Route(rss(_posts(2, 1)))
    assert (await site.follow("/feed.xml")).status_code == 200
    async with site.container.db.write() as conn:
        await conn.execute(text(_FAILING_UPDATE[is_postgresql(conn)]))
    with pytest.raises(Exception, match="power cut"):
        await site.container.feeds.run_now("weekly")
    assert (await site.count(campaigns), await site.count(feed_items)) == (0, 0)
    async with site.container.db.write() as conn:
        for statement in _DROP_TRIGGER[is_postgresql(conn)]:
            await conn.execute(text(statement))
    recovered = (await site.run()).json()
    assert recovered["item_count"] == 2
    assert (await site.run()).json()["campaign_id"] is None
    assert (await site.count(campaigns), await site.count(feed_items)) == (1, 2)


_FAILING_UPDATE = {
    False: "CREATE TRIGGER crash BEFORE UPDATE ON newsletter_feeds "
    "BEGIN SELECT RAISE(ABORT, 'power cut'); END",
    True: "CREATE FUNCTION crash() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'power cut'; "
    "END $$ LANGUAGE plpgsql; CREATE TRIGGER crash BEFORE UPDATE ON newsletter_feeds "
    "FOR EACH ROW EXECUTE FUNCTION crash()",
}
_DROP_TRIGGER = {
    False: ["DROP TRIGGER crash"],
    True: ["DROP TRIGGER crash ON newsletter_feeds", "DROP FUNCTION crash()"],
}


async def test_workers_read_a_due_feed_once_on_its_schedule(site: Site, database_url: str) -> None:
    """However many workers see the feed due, one `run_feed` job exists for its due time;
    the workers make one digest, and the next read is the next Monday 09:00 in Paris."""
    site.feeds.routes["/feed.xml"] = Route(rss(_posts(1)))
    assert (await site.follow("/feed.xml", every="mon 09:00")).status_code == 200
    await site.container.feeds.queue_due()
    assert await site.count(jobs) == 0  # not due yet
    site.clock.now = datetime(2026, 6, 8, 7, 0, 30, tzinfo=UTC)
    other = build(make_settings(database_url, **FEED_SETTINGS), clock=site.clock)
    try:
        for queuer in (site.container, other, site.container):  # three workers' periodic task
            assert await queuer.feeds.queue_due() == 1
    finally:
        await other.close()
    async with site.container.db.read() as conn:
        queued = (await conn.execute(select(jobs.c.idempotency_key))).scalars().all()
    view = await site.container.feeds.get("weekly")
    assert view is not None
    due = int(datetime(2026, 6, 8, 7, 0, tzinfo=UTC).timestamp())
    assert queued == [f"run_feed:{view.newsletter.id}:{due}"]

    async def feed_read() -> bool:
        view = await site.container.feeds.get("weekly")
        return view is not None and view.feed.last_success_at is not None

    async with workers(site.container):
        await wait_for(feed_read, message="the workers never read the due feed")
    view = await site.container.feeds.get("weekly")
    assert view is not None
    assert view.feed.next_run_at == datetime(2026, 6, 15, 7, 0, tzinfo=UTC)
    assert await site.count(campaigns) == 1
    assert site.feeds.hits("/feed.xml") == 2  # the check when following, and the one read


async def test_send_mode_sends_the_digest_to_the_readers(site: Site) -> None:
    """In `send` mode the digest is queued to send in the transaction that made it, and the
    workers send it like any campaign."""
    site.feeds.routes["/feed.xml"] = Route(rss(_posts(1)))
    assert (await site.follow("/feed.xml", mode="send")).status_code == 200
    made = (await site.run()).json()
    campaign_id = made["campaign_id"]

    async def sent() -> bool:
        async with site.container.db.read() as conn:
            status = (
                await conn.execute(select(campaigns.c.status).where(campaigns.c.id == campaign_id))
            ).scalar_one()
        return status == "submitted"

    async with workers(site.container):
        await wait_for(sent, message="the digest was never sent")
    captured = await site.container.captured_mail.list(limit=10)
    assert sorted(message.recipients[0] for message in captured) == [
        f"reader{number}@example.org" for number in range(3)
    ]
    assert all(message.subject == "Post 1" for message in captured)


async def test_a_failing_feed_is_named_on_the_page_with_the_next_try(
    database_url: str,
) -> None:
    """A feed that starts failing is recorded with its error, the count and the next try
    (sooner than the schedule, backing off), and the newsletter's page says so."""
    clock = Clock(NOW)
    settings = make_settings(database_url, **FEED_SETTINGS)
    async with feed_server() as served, ui_app(settings, clock=clock) as (browser, container):
        async with container.db.write() as conn:
            await rows.newsletter(conn, slug="weekly", name="Weekly")
        client = browser()
        csrf = await signed_in(client, container)
        served.routes["/feed.xml"] = Route(rss(_posts(1)))
        followed = await client.post(
            "/admin/newsletters/weekly/feed",
            data={
                "url": served.url("/feed.xml"),
                "every": "daily 18:00",
                "mode": "draft",
                "csrf_token": csrf,
            },
        )
        assert followed.status_code == 303, followed.text
        served.routes["/feed.xml"] = Route(b"<html>maintenance</html>", content_type="text/html")
        ran = await client.post("/admin/newsletters/weekly/feed/run", data={"csrf_token": csrf})
        assert ran.status_code == 422
        assert "not an RSS or Atom feed" in ran.text
        page = await client.get("/admin/newsletters/weekly")
        assert "This feed is failing (1 in a row)" in page.text
        assert "Next try: 2026-06-01 10:15 Europe/Paris" in page.text
        ran = await client.post("/admin/newsletters/weekly/feed/run", data={"csrf_token": csrf})
        view = await container.feeds.get("weekly")
        assert view is not None
        assert view.feed.failures == 2
        assert view.feed.next_run_at == NOW + timedelta(minutes=30)
        served.routes["/feed.xml"] = Route(rss(_posts(1)))
        ran = await client.post("/admin/newsletters/weekly/feed/run", data={"csrf_token": csrf})
        assert "Digest campaign" in ran.text
        page = await client.get("/admin/newsletters/weekly")
        assert "This feed is failing" not in page.text


async def test_a_digest_that_cannot_be_sent_stays_a_draft_and_the_feed_says_why(
    site: Site,
) -> None:
    """`send` mode for a newsletter nobody reads: the send is refused, the digest stays a
    draft (its items stay taken), and the feed's last error names the campaign and why."""
    async with site.container.db.write() as conn:
        await rows.newsletter(conn, slug="empty", name="Empty")
    site.feeds.routes["/feed.xml"] = Route(rss(_posts(1)))
    followed = await site.http.put(
        "/api/admin/newsletters/empty/feed",
        json={"url": site.feeds.url("/feed.xml"), "mode": "send"},
        headers=site.headers,
    )
    assert followed.status_code == 200, followed.text
    made = await site.http.post("/api/admin/newsletters/empty/feed/run", headers=site.headers)
    campaign_id = made.json()["campaign_id"]

    async def noted() -> str | None:
        view = await site.container.feeds.get("empty")
        assert view is not None
        return view.feed.last_error

    async with workers(site.container):
        error = await wait_for(noted, message="the refused send was never noted")
    assert error == (
        f"digest campaign {campaign_id} was left as a draft: nobody would receive it: "
        "empty has no confirmed subscriber in this audience"
    )
    async with site.container.db.read() as conn:
        status = await conn.execute(select(campaigns.c.status).where(campaigns.c.id == campaign_id))
        assert status.scalar_one() == "draft"
