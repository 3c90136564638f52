"""The click and open endpoints through the real app (ENG-2, ENG-3, ENG-4, issue 36 items
3 and 8): a redirect to the stored URL, a pixel, and for anything that does not verify a small
404 that records nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import delete, text

from tests.factories import api_client, make_settings
from tests.support.clock import Clock
from tests.support.tracking import (
    LINKS,
    click_path,
    counters,
    intake_rows,
    sent_campaign,
)
from tidings.api.public.tracking import PIXEL
from tidings.bootstrap import Container
from tidings.domain.tracking import TrackingSigner
from tidings.engagement.apply import apply_all
from tidings.storage.tables import campaigns

BROWSER = {"user-agent": "Mozilla/5.0 (X11; Linux x86_64; rv:124.0) Gecko/20100101 Firefox/124.0"}
SENT_AT = datetime.now(UTC) - timedelta(hours=1)


def _from_address(client: httpx.AsyncClient, address: str) -> httpx.AsyncClient:
    """A client of the same app whose requests come from `address`."""
    app = client._transport.app  # type: ignore[attr-defined]
    transport = httpx.ASGITransport(app=app, client=(address, 1))
    return httpx.AsyncClient(transport=transport, base_url="http://tidings.test")


async def _setup(container: Container) -> tuple[TrackingSigner, int, str]:
    sent = await sent_campaign(container.db, readers=2, mode="aggregate", now=SENT_AT)
    signer = TrackingSigner(container.site_secret())
    return signer, sent.campaign_id, signer.message_token(sent.campaign_id, SENT_AT)


async def test_a_click_redirects_to_its_stored_url_and_is_recorded(database_url: str) -> None:
    """A reader's click must land where the author linked, at once, and count as a person's
    click on that link and on the issue as a whole."""
    async with api_client(make_settings(database_url)) as (client, container):
        signer, campaign_id, message = await _setup(container)
        answer = await client.get(click_path(signer, campaign_id, 2, message), headers=BROWSER)
        assert answer.status_code == 302
        assert answer.headers["location"] == "https://example.org/two?a=1&b=%C3%A9"
        assert answer.headers["cache-control"] == "no-store, private"
        assert answer.headers["referrer-policy"] == "no-referrer"
        [row] = await intake_rows(container.db)
        assert (row.number, row.kind, row.verdict, row.reason, row.client_family) == (
            2,
            "click",
            "human",
            "browser",
            "browser",
        )
        assert row.recipient_id is None
        assert await apply_all(container.db) == 1
        assert await counters(container.db, campaign_id) == {
            (2, "click"): (1, 1, 0),
            (0, "click"): (1, 1, 0),
        }
        metrics = container.metrics.render().decode()
        assert 'tidings_engagement_hits_total{kind="click",verdict="human"} 1.0' in metrics


async def test_the_pixel_is_a_small_uncached_gif_whatever_range_is_asked(
    database_url: str,
) -> None:
    """Mail clients must fetch the pixel afresh (a cached one is an open never seen), and a
    Range request gets the whole 43 bytes, not a partial answer to puzzle over."""
    async with api_client(make_settings(database_url)) as (client, container):
        signer, campaign_id, message = await _setup(container)
        headers = {**BROWSER, "range": "bytes=0-3"}
        answer = await client.get(click_path(signer, campaign_id, 0, message), headers=headers)
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "image/gif"
        assert answer.headers["cache-control"] == "no-store, private"
        assert answer.content == PIXEL
        assert len(answer.content) == 43
        [row] = await intake_rows(container.db)
        assert (row.number, row.kind, row.verdict) == (0, "open", "human")


async def test_head_requests_are_answered_and_counted_as_a_machines(database_url: str) -> None:
    """Scanners probe links with HEAD; people's clients never do. They still get a clear
    answer, with no body."""
    async with api_client(make_settings(database_url)) as (client, container):
        signer, campaign_id, message = await _setup(container)
        click = await client.head(click_path(signer, campaign_id, 1, message), headers=BROWSER)
        pixel = await client.head(click_path(signer, campaign_id, 0, message), headers=BROWSER)
        assert (click.status_code, click.headers["location"], click.content) == (
            302,
            LINKS[1].url,
            b"",
        )
        assert (pixel.status_code, pixel.content) == (200, b"")
        rows = await intake_rows(container.db)
        assert [(r.kind, r.verdict, r.reason) for r in rows] == [
            ("click", "machine", "head"),
            ("open", "machine", "head"),
        ]


async def test_the_hidden_link_redirects_but_counts_as_a_machines(database_url: str) -> None:
    """No person can see the hidden link, so whoever follows it is a scanner: redirected like
    anyone (no way to tell it apart from outside), never counted as a reader."""
    async with api_client(make_settings(database_url)) as (client, container):
        signer, campaign_id, message = await _setup(container)
        answer = await client.get(click_path(signer, campaign_id, 4, message), headers=BROWSER)
        assert (answer.status_code, answer.headers["location"]) == (302, LINKS[4].url)
        [row] = await intake_rows(container.db)
        assert (row.verdict, row.reason) == ("machine", "hidden_link")


def _bad_paths(signer: TrackingSigner, campaign_id: int, message: str) -> dict[str, str]:
    link = signer.link_token(campaign_id, "free", 1)
    other = signer.message_token(campaign_id + 1, SENT_AT)
    forged = TrackingSigner("not the site secret")
    return {
        "altered link signature": f"/c/{link[:-1]}{'A' if link[-1] != 'A' else 'B'}/{message}",
        "altered link number": f"/c/{link.replace('.1.', '.3.', 1)}/{message}",
        "altered message": f"/c/{link}/{message[:-2]}xx",
        "truncated message": f"/c/{link}/{message[:20]}",
        "missing message": f"/c/{link}/",
        "another campaign's message": f"/c/{link}/{other}",
        "forged with another key": "/c/"
        + forged.link_token(campaign_id, "free", 1)
        + "/"
        + forged.message_token(campaign_id, SENT_AT),
        "unknown link": f"/c/{signer.link_token(campaign_id, 'free', 9)}/{message}",
        "unknown campaign": "/c/"
        + signer.link_token(campaign_id + 50, "free", 1)
        + "/"
        + signer.message_token(campaign_id + 50, SENT_AT),
        "pixel as a click": f"/c/{signer.link_token(campaign_id, 'free', 0)}/{message}",
        "click as a pixel": f"/o/{link}/{message}",
        "extra segment": f"/c/{link}/{message}/more",
        "enormous": f"/c/{link}/{'A' * 60_000}",
        "binary": f"/c/{link}/%00%FF%FE%C3%28{message}",
    }


async def test_no_token_that_fails_to_verify_redirects_or_records(database_url: str) -> None:
    """An open redirect would let anyone borrow the publisher's domain for phishing: a token
    forged, altered, cut short, swapped between campaigns, enormous or binary gets the same
    small 404 page, never a redirect, never a 5xx, and nothing is recorded."""
    async with api_client(make_settings(database_url)) as (client, container):
        signer, campaign_id, message = await _setup(container)
        answers = {}
        for name, path in _bad_paths(signer, campaign_id, message).items():
            answer = await client.get(httpx.URL(path), headers=BROWSER)
            answers[name] = (
                answer.status_code,
                "location" in answer.headers,
                answer.headers.get("content-type"),
                len(answer.content) < 300,
            )
        assert answers == dict.fromkeys(answers, (404, False, "text/html; charset=utf-8", True))
        assert await intake_rows(container.db) == []


async def test_a_deleted_campaigns_links_answer_404_and_record_nothing(
    database_url: str,
) -> None:
    """Once a campaign is deleted its links lead nowhere: a plain 404, no hit kept for it."""
    async with api_client(make_settings(database_url)) as (client, container):
        signer, campaign_id, message = await _setup(container)
        async with container.db.write() as conn:
            await conn.execute(delete(campaigns).where(campaigns.c.id == campaign_id))
        answer = await client.get(click_path(signer, campaign_id, 1, message), headers=BROWSER)
        assert answer.status_code == 404
        assert await intake_rows(container.db) == []


@pytest.mark.parametrize("method", ["POST", "PUT"])
async def test_other_methods_are_not_taken_as_hits(database_url: str, method: str) -> None:
    """Only GET and HEAD are hits; anything else is refused by the app and records nothing."""
    async with api_client(make_settings(database_url)) as (client, container):
        signer, campaign_id, message = await _setup(container)
        answer = await client.request(method, click_path(signer, campaign_id, 1, message))
        assert 400 <= answer.status_code < 500
        assert await intake_rows(container.db) == []


async def test_a_flooding_source_never_hides_a_real_readers_click(database_url: str) -> None:
    """One address hammering a link (a scanner farm, a script) is counted as a machine past
    its rate and then not recorded at all, while still redirected; a reader elsewhere in the
    same minute is counted as a person."""
    settings = make_settings(database_url, tracking={"source_hits_per_minute": 10})
    clock = Clock(SENT_AT.replace(second=0, microsecond=0) + timedelta(hours=1))  # one minute
    async with api_client(settings, clock=clock) as (client, container):
        signer, campaign_id, message = await _setup(container)
        path = click_path(signer, campaign_id, 1, message)
        flood = _from_address(client, "198.51.100.7")
        async with flood:
            statuses = {(await flood.get(path, headers=BROWSER)).status_code for _ in range(120)}
        reader = await client.get(path, headers=BROWSER)
        assert statuses == {302}
        assert reader.status_code == 302
        rows = await intake_rows(container.db)
        verdicts = [(row.verdict, row.reason) for row in rows]
        assert verdicts.count(("machine", "flood")) == 90  # hits 11 to 100; past 100 unrecorded
        assert verdicts.count(("human", "browser")) == 11  # the first ten, and the reader
        assert verdicts[-1] == ("human", "browser")


async def test_a_reader_is_redirected_even_when_their_hit_cannot_be_written(
    database_url: str,
) -> None:
    """The reader clicked to read the article, not to be counted: when the intake cannot be
    written, the redirect still goes out at once and the lost hit shows in a metric."""
    async with api_client(make_settings(database_url)) as (client, container):
        signer, campaign_id, message = await _setup(container)
        path = click_path(signer, campaign_id, 1, message)
        assert (await client.get(path, headers=BROWSER)).status_code == 302  # link now cached
        async with container.db.write() as conn:
            await conn.execute(text("DROP TABLE engagement_intake"))
        answer = await client.get(path, headers=BROWSER)
        assert (answer.status_code, answer.headers["location"]) == (302, LINKS[1].url)
        metrics = container.metrics.render().decode()
        assert "tidings_engagement_hits_dropped_total 1.0" in metrics


async def test_apple_proxy_opens_are_a_machines_and_gmail_proxy_opens_a_persons(
    database_url: str,
) -> None:
    """Apple fetches every pixel on delivery (half a list "opens" within minutes), Gmail's
    proxy only when someone opens: told apart by agent and address, and stored as a verdict
    and a family, never the agent or the address."""
    async with api_client(make_settings(database_url)) as (client, container):
        signer, campaign_id, message = await _setup(container)
        pixel = click_path(signer, campaign_id, 0, message)
        apple = _from_address(client, "17.58.0.1")
        async with apple:
            assert (
                await apple.get(pixel, headers={"user-agent": "Mozilla/5.0"})
            ).status_code == 200
        gmail = (
            "Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 "
            "(via ggpht.com GoogleImageProxy)"
        )
        assert (await client.get(pixel, headers={"user-agent": gmail})).status_code == 200
        rows = await intake_rows(container.db)
        assert [(r.verdict, r.reason, r.client_family) for r in rows] == [
            ("machine", "privacy_proxy", "apple_mpp"),
            ("human", "image_proxy", "gmail_proxy"),
        ]
        stored = " ".join(str(value) for row in rows for value in row)
        assert "17.58.0.1" not in stored
        assert "GoogleImageProxy" not in stored
