"""An RSS or Atom document, read with feedparser, as typed items (AUT-2).

feedparser reads RSS 0.9x-2.0, RSS 1.0 and Atom 0.3/1.0, and recovers from the usual
malformations; a document it cannot recognise as any feed (an HTML page, JSON, plain text)
is refused. It is handed the bytes only, never the URL: it would otherwise fetch it itself,
past the SSRF guard. Text is kept as the feed gives it; sanitising is the digest's work.
"""

from __future__ import annotations

import calendar
import io
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tidings.domain.errors import TidingsError

MAX_ITEMS = 500  # items read from one document; a feed rarely carries more than 50


class FeedUnavailable(TidingsError):
    """The feed could not be read: `detail` says why, without the body (safe to show and log)."""

    code = "feed_unavailable"
    title = "The feed could not be read"


class NotAFeed(FeedUnavailable):
    """The body is not an RSS or Atom feed."""

    code = "not_a_feed"
    title = "The document is not an RSS or Atom feed"


@dataclass(frozen=True, slots=True)
class FeedItem:
    guid: str | None
    link: str | None
    title: str
    summary: str  # HTML as the feed gives it (Atom `summary`, RSS `description`)
    image: str | None  # an absolute http(s) URL, when the item names one
    published: datetime | None  # UTC: published, else updated, when the feed says


@dataclass(frozen=True, slots=True)
class FeedDocument:
    title: str
    link: str | None
    format: str  # feedparser's name: rss20, atom10, ...
    items: tuple[FeedItem, ...]


def parse_feed(body: bytes, url: str) -> FeedDocument:
    """The feed in `body`, fetched from `url` (relative links resolve against it)."""
    import feedparser  # ~12 MB: loaded by the process that reads a feed, not by every worker

    parsed = feedparser.parse(
        io.BytesIO(body),
        response_headers={"content-location": url},
        sanitize_html=False,  # the digest sanitises with the rest of tidings' content
    )
    if not parsed.get("version"):
        problem = parsed.get("bozo_exception")
        detail = f" ({type(problem).__name__})" if problem is not None else ""
        raise NotAFeed(f"the document is not an RSS or Atom feed{detail}")
    channel: Mapping[str, Any] = parsed.get("feed", {})
    items = tuple(_item(entry) for entry in parsed.get("entries", [])[:MAX_ITEMS])
    return FeedDocument(
        title=_text(channel.get("title")),
        link=_http_url(channel.get("link")),
        format=str(parsed["version"]),
        items=items,
    )


def _item(entry: Mapping[str, Any]) -> FeedItem:
    summary = _text(entry.get("summary"))
    contents = entry.get("content") or []
    if not summary and contents:
        summary = _text(contents[0].get("value"))
    return FeedItem(
        guid=_text(entry.get("id")) or None,
        link=_http_url(entry.get("link")),
        title=_text(entry.get("title")),
        summary=summary,
        image=_image(entry),
        published=_moment(entry.get("published_parsed") or entry.get("updated_parsed")),
    )


def _image(entry: Mapping[str, Any]) -> str | None:
    """The first image the item names: a media thumbnail, image media content, an image
    enclosure, or an itunes/Atom image."""
    candidates: list[Any] = [thumb.get("url") for thumb in entry.get("media_thumbnail") or []]
    candidates += [
        media.get("url")
        for media in entry.get("media_content") or []
        if media.get("medium") == "image" or str(media.get("type", "")).startswith("image/")
    ]
    candidates += [
        link.get("href")
        for link in entry.get("links") or []
        if link.get("rel") == "enclosure" and str(link.get("type", "")).startswith("image/")
    ]
    image = entry.get("image")
    if isinstance(image, Mapping):
        candidates.append(image.get("href"))
    return next((url for url in map(_http_url, candidates) if url), None)


def _http_url(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    value = value.strip()
    return value if value.lower().startswith(("http://", "https://")) else None


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _moment(value: Any) -> datetime | None:
    # feedparser gives UTC struct_times; a few feeds carry dates outside what Python can hold.
    try:
        return datetime.fromtimestamp(calendar.timegm(value), UTC) if value else None
    except (OverflowError, ValueError, TypeError):
        return None
