"""A feed server on a loopback port (a real socket): RSS and Atom documents with ETag and
Last-Modified (answering 304 to a matching conditional request), redirects, a huge body
sent in chunks, and anything else a test puts at a path."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from xml.sax.saxutils import escape

LAST_MODIFIED = "Mon, 05 Jan 2026 08:00:00 GMT"


@dataclass
class Route:
    body: bytes = b""
    status: int = 200
    content_type: str = "application/rss+xml"
    etag: str | None = None
    location: str | None = None
    huge_bytes: int = 0  # stream this many bytes of filler instead of `body`
    stall: bool = False  # never answer (until the client hangs up)


@dataclass
class FeedServer:
    port: int
    routes: dict[str, Route] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def hits(self, path: str) -> int:
        return sum(1 for seen, _ in self.requests if seen == path)


@dataclass(frozen=True)
class Item:
    title: str
    link: str | None = None
    guid: str | None = None
    summary: str = ""
    published: datetime | None = None
    image: str | None = None


def rss(items: list[Item], *, title: str = "The Blog") -> bytes:
    """An RSS 2.0 document (with a media:thumbnail per item that has an image)."""
    parts = [
        '<?xml version="1.0" encoding="utf-8"?>',
        '<rss version="2.0" xmlns:media="http://search.yahoo.com/mrss/"><channel>',
        f"<title>{escape(title)}</title><link>https://blog.example/</link>",
        "<description>Posts</description>",
    ]
    for item in items:
        parts.append("<item>")
        parts.append(f"<title>{escape(item.title)}</title>")
        if item.link:
            parts.append(f"<link>{escape(item.link)}</link>")
        if item.guid:
            parts.append(f'<guid isPermaLink="false">{escape(item.guid)}</guid>')
        if item.summary:
            parts.append(f"<description>{escape(item.summary)}</description>")
        if item.published:
            parts.append(f"<pubDate>{format_datetime(item.published, usegmt=True)}</pubDate>")
        if item.image:
            parts.append(f'<media:thumbnail url="{escape(item.image)}"/>')
        parts.append("</item>")
    parts.append("</channel></rss>")
    return "".join(parts).encode()


def atom(items: list[Item], *, title: str = "The Journal") -> bytes:
    """An Atom 1.0 document; summaries are HTML (type="html")."""
    parts = [
        '<?xml version="1.0" encoding="utf-8"?>',
        '<feed xmlns="http://www.w3.org/2005/Atom">',
        f"<title>{escape(title)}</title><id>urn:journal</id>",
        "<updated>2026-01-01T00:00:00Z</updated>",
    ]
    for item in items:
        parts.append("<entry>")
        parts.append(f"<title>{escape(item.title)}</title>")
        parts.append(f"<id>{escape(item.guid or item.link or '')}</id>")
        if item.link:
            parts.append(f'<link rel="alternate" href="{escape(item.link)}"/>')
        stamp = (item.published or datetime(2026, 1, 1, tzinfo=UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
        parts.append(f"<updated>{stamp}</updated>")
        if item.summary:
            parts.append(f'<summary type="html">{escape(item.summary)}</summary>')
        parts.append("</entry>")
    parts.append("</feed>")
    return "".join(parts).encode()


def _response(status: int, headers: dict[str, str], body: bytes) -> bytes:
    reason = {200: "OK", 304: "Not Modified", 404: "Not Found"}.get(status, "Status")
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode() + body


@asynccontextmanager
async def feed_server() -> AsyncIterator[FeedServer]:
    """Serves `routes` (path -> Route); unknown paths are 404. Yields the server."""
    served = FeedServer(port=0)
    handlers: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            request_line, *header_lines = head.split("\r\n")
            path = request_line.split(" ")[1]
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.partition(":") for line in header_lines if line)
            }
            served.requests.append((path, headers))
            route = served.routes.get(path)
            if route is None:
                writer.write(_response(404, {}, b"no such feed"))
            elif route.stall:
                await reader.read(-1)
            elif route.location is not None:
                writer.write(_response(route.status, {"Location": route.location}, b""))
            elif route.huge_bytes:
                writer.write(
                    f"HTTP/1.1 200 OK\r\nContent-Type: {route.content_type}\r\n"
                    "Connection: close\r\n\r\n".encode()
                )
                chunk = b"<!-- filler -->" * 4096
                sent = 0
                while sent < route.huge_bytes:
                    writer.write(chunk)
                    sent += len(chunk)
                    await writer.drain()
            elif route.etag is not None and headers.get("if-none-match") == route.etag:
                writer.write(_response(304, {"ETag": route.etag}, b""))
            else:
                extra = {"Content-Type": route.content_type, "Last-Modified": LAST_MODIFIED}
                if route.etag is not None:
                    extra["ETag"] = route.etag
                writer.write(_response(route.status, extra, route.body))
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client hung up (a cap, a deadline): what the test wanted
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            handlers.discard(task)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    served.port = server.sockets[0].getsockname()[1]
    async with server:
        try:
            yield served
        finally:
            # Connections still open are finished here, on this loop, not collected later.
            for task in list(handlers):
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)


@contextmanager
def feed_server_thread() -> Iterator[FeedServer]:
    """`feed_server` on an event loop of its own thread: for a test that runs commands in its
    own (blocking) thread, as a `tidings` command run by hand does."""
    ready = threading.Event()
    served: list[FeedServer] = []
    stop: list[asyncio.Event] = []

    async def serve() -> None:
        stop.append(asyncio.Event())
        async with feed_server() as server:
            served.append(server)
            ready.set()
            await stop[0].wait()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10), "the feed server did not start"
    try:
        yield served[0]
    finally:
        loop.call_soon_threadsafe(stop[0].set)
        thread.join(10)
        loop.close()
