"""The feed client (AUT-2) against a real feed server on loopback: RSS and Atom read into
items, conditional requests answered 304, redirects followed and re-checked at every hop,
the size cap, the deadline, and documents that are not feeds. Only DNS is faked."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from tests.support.feed_server import FeedServer, Item, Route, atom, feed_server, rss
from tidings.delivery.feed_client import FeedClient, Validators
from tidings.delivery.feed_parsing import FeedUnavailable, NotAFeed

POSTED = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)


@pytest.fixture
async def server() -> AsyncIterator[FeedServer]:
    """A feed server with nothing at any path yet."""
    async with feed_server() as served:
        yield served


@pytest.fixture
async def client() -> AsyncIterator[FeedClient]:
    """The real client, private networks allowed (the server is on loopback), short limits."""
    reader = FeedClient(allow_private_networks=True, timeout_seconds=2.0, max_bytes=200_000)
    yield reader
    await reader.aclose()


async def test_rss_items_are_read_with_guid_link_summary_image_and_date(
    server: FeedServer, client: FeedClient
) -> None:
    """Everything a digest shows comes out of an RSS document: a guid when there is one,
    else the link identifies the item; relative links resolve against the feed's URL."""
    server.routes["/feed.xml"] = Route(
        rss(
            [
                Item(
                    "First & best",
                    link="/posts/1",
                    guid="post-1",
                    summary="<p>Hello</p>",
                    published=POSTED,
                    image="https://blog.example/1.png",
                ),
                Item("Second", link="https://blog.example/posts/2"),
            ]
        )
    )
    read = await client.read(server.url("/feed.xml"))
    assert read.document is not None
    assert read.document.format == "rss20"
    first, second = read.document.items
    assert first.guid == "post-1"
    assert first.title == "First & best"
    assert first.link == server.url("/posts/1")
    assert first.summary == "<p>Hello</p>"
    assert first.image == "https://blog.example/1.png"
    assert first.published == POSTED
    assert (second.guid, second.link, second.published) == (
        None,
        "https://blog.example/posts/2",
        None,
    )


async def test_atom_entries_are_read(server: FeedServer, client: FeedClient) -> None:
    """Atom's id is the guid and its HTML summary arrives as HTML."""
    server.routes["/atom"] = Route(
        atom([Item("Entry", link="https://j.example/e", guid="urn:e", summary="<b>x</b>")]),
        content_type="application/atom+xml",
    )
    read = await client.read(server.url("/atom"))
    assert read.document is not None
    assert read.document.format == "atom10"
    (entry,) = read.document.items
    assert (entry.guid, entry.link, entry.summary) == ("urn:e", "https://j.example/e", "<b>x</b>")


async def test_an_unchanged_feed_answers_304_to_its_etag(
    server: FeedServer, client: FeedClient
) -> None:
    """The validators of a full answer are sent back; the server's 304 reads as "nothing
    new" without a body, and keeps the validators for next time."""
    server.routes["/feed.xml"] = Route(rss([Item("One", guid="1")]), etag='"v1"')
    first = await client.read(server.url("/feed.xml"))
    assert first.document is not None
    assert first.validators.etag == '"v1"'
    assert first.validators.last_modified is not None
    again = await client.read(server.url("/feed.xml"), first.validators)
    assert again.document is None
    assert again.validators == first.validators
    _, headers = server.requests[-1]
    assert headers["if-none-match"] == '"v1"'
    assert headers["if-modified-since"] == first.validators.last_modified


async def test_redirects_are_followed(server: FeedServer, client: FeedClient) -> None:
    """A moved feed is still read, from where it moved to."""
    server.routes["/old"] = Route(status=301, location="/new")
    server.routes["/new"] = Route(rss([Item("Moved", guid="m")]))
    read = await client.read(server.url("/old"))
    assert read.document is not None
    assert read.final_url == server.url("/new")


async def test_a_redirect_to_a_forbidden_address_is_refused_before_dialing(
    server: FeedServer, client: FeedClient
) -> None:
    """Every hop is checked: a feed that redirects to the cloud metadata service (refused even
    where private networks are allowed) is not followed there."""
    server.routes["/feed.xml"] = Route(status=302, location="http://169.254.169.254/latest/")
    with pytest.raises(FeedUnavailable, match="redirected to a cloud metadata address"):
        await client.read(server.url("/feed.xml"))


async def test_a_redirect_to_a_name_resolving_to_a_forbidden_address_is_refused(
    server: FeedServer,
) -> None:
    """A name is checked where it is dialed: the guard refuses its answer."""

    async def dns(host: str, port: int) -> list[str]:
        return ["169.254.169.254"] if host == "metadata.example" else ["127.0.0.1"]

    reader = FeedClient(allow_private_networks=True, resolver=dns, timeout_seconds=2.0)
    server.routes["/feed.xml"] = Route(status=307, location="http://metadata.example/x")
    try:
        with pytest.raises(FeedUnavailable, match="cloud metadata address"):
            await reader.read(server.url("/feed.xml"))
    finally:
        await reader.aclose()


async def test_private_addresses_are_refused_unless_allowed(server: FeedServer) -> None:
    """Without `webhooks.allow_private_networks`, a feed on loopback is never dialed, and
    the message names the setting that would let it in."""
    server.routes["/feed.xml"] = Route(rss([Item("One", guid="1")]))
    reader = FeedClient(timeout_seconds=2.0)
    try:
        with pytest.raises(FeedUnavailable, match=r"loopback .*allow_private_networks"):
            await reader.read(server.url("/feed.xml"))
    finally:
        await reader.aclose()
    assert server.requests == []


async def test_redirect_loops_stop(server: FeedServer, client: FeedClient) -> None:
    """A feed that redirects to itself fails after the configured number of hops."""
    server.routes["/loop"] = Route(status=302, location="/loop")
    with pytest.raises(FeedUnavailable, match="more than 5 redirects"):
        await client.read(server.url("/loop"))
    assert server.hits("/loop") == 6


async def test_a_huge_body_stops_at_the_cap(server: FeedServer, client: FeedClient) -> None:
    """Reading stops at `max_bytes`, whether or not the server said how long it is: a 50 MB
    answer costs about the cap, not 50 MB."""
    server.routes["/huge"] = Route(huge_bytes=50_000_000)
    server.routes["/declared"] = Route(b"x" * 300_000)
    started = time.monotonic()
    with pytest.raises(FeedUnavailable, match=r"larger than feeds.max_bytes \(200,000 bytes\)"):
        await client.read(server.url("/huge"))
    assert time.monotonic() - started < 2.0
    with pytest.raises(FeedUnavailable, match=r"larger than feeds\.max_bytes"):
        await client.read(server.url("/declared"))


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"<html><body><p>A blog</p></body></html>", "text/html"),
        (b'{"items": []}', "application/json"),
        (b"just words", "text/plain"),
    ],
)
async def test_a_document_that_is_not_a_feed_is_refused(
    server: FeedServer, client: FeedClient, body: bytes, content_type: str
) -> None:
    """An HTML page, JSON or text is not mistaken for an empty feed."""
    server.routes["/page"] = Route(body, content_type=content_type)
    with pytest.raises(NotAFeed, match="not an RSS or Atom feed"):
        await client.read(server.url("/page"))


async def test_an_error_status_is_named(server: FeedServer, client: FeedClient) -> None:
    """A 404 is a failure that says which status came back."""
    with pytest.raises(FeedUnavailable, match="HTTP 404"):
        await client.read(server.url("/missing"))


async def test_a_server_that_never_answers_is_cut_off_at_the_deadline(
    server: FeedServer,
) -> None:
    """The whole read runs under `timeout_seconds`."""
    server.routes["/feed.xml"] = Route(stall=True)
    reader = FeedClient(allow_private_networks=True, timeout_seconds=0.3)
    started = time.monotonic()
    try:
        with pytest.raises(FeedUnavailable, match=r"within 0\.3 seconds"):
            await reader.read(server.url("/feed.xml"), Validators())
    finally:
        await reader.aclose()
    assert time.monotonic() - started < 2.0
