"""`tidings newsletters feed` and `feed-run` (AUT-2) as an operator runs them, against a real
feed server on loopback; and two reads at once never share an item."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from tests.factories import api_client, make_settings
from tests.support import rows
from tests.support.cli import tidings_cli
from tests.support.feed_server import Item, Route, feed_server, feed_server_thread, rss
from tidings.storage.tables import campaigns, feed_items, newsletter_feeds

SOON = datetime.now(UTC) + timedelta(hours=1)
POSTS = [
    Item(f"Post {number}", link=f"https://blog.example/{number}", published=SOON)
    for number in (2, 1)
]


def test_the_feed_commands_follow_show_run_and_stop(database_url: str) -> None:
    """Bad input names its field and changes nothing; following reads the feed once; the
    show names the schedule and next read; feed-run makes a digest, then none; --off stops."""
    tidings = tidings_cli(database_url, TIDINGS_WEBHOOKS_ALLOW_PRIVATE_NETWORKS="true")
    created = tidings(
        *("newsletters", "create", "weekly", "--name", "Weekly"),
        *("--sender-name", "E", "--sender-address", "e@example.org"),
    )
    assert created.returncode == 0, created.stderr
    with feed_server_thread() as served:
        served.routes["/feed.xml"] = Route(rss(POSTS))
        served.routes["/page"] = Route(b"<html>hello</html>", content_type="text/html")
        url = served.url("/feed.xml")

        bad_schedule = tidings("newsletters", "feed", "weekly", url, "--every", "mon 9")
        assert bad_schedule.returncode == 1
        assert "every must be days and a time" in bad_schedule.stderr
        assert "(every)" in bad_schedule.stderr
        bad_mode = tidings("newsletters", "feed", "weekly", url, "--mode", "later")
        assert bad_mode.returncode == 1
        assert "(mode)" in bad_mode.stderr
        not_a_feed = tidings("newsletters", "feed", "weekly", served.url("/page"))
        assert not_a_feed.returncode == 1
        assert "not an RSS or Atom feed" in not_a_feed.stderr
        assert "nothing was changed" in not_a_feed.stderr
        nothing = tidings("newsletters", "feed", "weekly")
        assert "weekly follows no feed." in nothing.stdout
        assert "follows no feed" in tidings("newsletters", "feed-run", "weekly").stderr

        followed = tidings(
            "newsletters", "feed", "weekly", url, "--every", "weekdays 07:30", "--mode", "draft"
        )
        assert followed.returncode == 0, followed.stderr
        assert f"weekly follows {url}" in followed.stdout
        assert "every weekdays 07:30 (draft)" in followed.stdout
        assert "next read 20" in followed.stdout

        ran = tidings("newsletters", "feed-run", "weekly")
        assert ran.returncode == 0, ran.stderr
        assert "digest campaign 1 with 2 items, left as a draft" in ran.stdout
        again = tidings("newsletters", "feed-run", "weekly")
        assert "no new items; no campaign made" in again.stdout

        served.routes["/feed.xml"] = Route(status=500)
        failed = tidings("newsletters", "feed-run", "weekly")
        assert failed.returncode == 1
        assert "HTTP 500" in failed.stderr
        assert "next try at" in failed.stderr
        shown = tidings("newsletters", "feed", "weekly")
        assert "failing (1 in a row): HTTP 500 from the feed's server" in shown.stdout

        stopped = tidings("newsletters", "feed", "weekly", "--off")
        assert "stopped following its feed" in stopped.stdout
    assert "weekly follows no feed." in tidings("newsletters", "feed", "weekly").stdout
    audited = tidings("audit", "list", "--json")
    assert audited.returncode == 0, audited.stderr
    assert '"newsletter.feed"' in audited.stdout
    assert '"newsletter.feed_off"' in audited.stdout


async def test_two_reads_at_once_never_share_an_item(database_url: str) -> None:
    """A read by hand racing another (or a worker's): each item lands in exactly one digest,
    on PostgreSQL (the unique key waits for the first commit) as on SQLite (one writer)."""
    settings = make_settings(database_url, webhooks={"allow_private_networks": True})
    async with feed_server() as served, api_client(settings) as (_, container):
        async with container.db.write() as conn:
            await rows.newsletter(conn, slug="weekly")
        served.routes["/feed.xml"] = Route(rss(POSTS))
        await container.feeds.follow("weekly", served.url("/feed.xml"), "mon 09:00", "draft")
        results = await asyncio.gather(
            *(container.feeds.run_now("weekly") for _ in range(3)), return_exceptions=True
        )
        made = [result for result in results if not isinstance(result, BaseException)]
        assert sum(result.item_count for result in made) == 2, results
        async with container.db.read() as conn:
            count = select(func.count())
            assert (await conn.execute(count.select_from(campaigns))).scalar_one() == 1
            assert (await conn.execute(count.select_from(feed_items))).scalar_one() == 2
            assert (await conn.execute(count.select_from(newsletter_feeds))).scalar_one() == 1
