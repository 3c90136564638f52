"""Atom and RSS 2.0 feeds of a newsletter's archive (API-4), written by feedgen.

The feed carries each issue's full HTML as the archive page shows it (free segment, no
personal values), so a feed reader needs nothing else. Entry ids are the issue pages' URLs,
which never change once an issue is out, so readers never see an issue twice. Characters
XML 1.0 cannot carry (most C0 controls, lone surrogates) are left out of every text, so a
stray one typed into a description or a body never stops the feed being written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from feedgen.feed import FeedGenerator

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

# Everything outside XML 1.0's Char production; lxml refuses to write any of it.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """`text` without the characters an XML document cannot hold."""
    return _NOT_XML.sub("", text)


@dataclass(frozen=True, slots=True)
class FeedEntry:
    url: str
    title: str
    summary: str
    html: str
    published: datetime


@dataclass(frozen=True, slots=True)
class Feed:
    """One newsletter's feed: `page_url` is the archive index, `atom_url`/`rss_url` the feeds."""

    title: str
    description: str
    page_url: str
    atom_url: str
    rss_url: str
    author: str
    language: str
    entries: Sequence[FeedEntry]
    updated: datetime


def _generator(feed: Feed, self_url: str) -> FeedGenerator:
    from feedgen.feed import FeedGenerator  # loaded when a feed is asked for

    generator = FeedGenerator()
    generator.id(feed.page_url)
    title = xml_text(feed.title)
    generator.title(title)
    # RSS requires a description; Atom's subtitle must not be empty either.
    generator.description(xml_text(feed.description).strip() or f"The archive of {title}.")
    generator.author({"name": xml_text(feed.author)})
    generator.link(href=feed.page_url, rel="alternate")
    generator.link(href=self_url, rel="self")
    generator.language(feed.language)
    generator.updated(feed.updated)
    generator.lastBuildDate(feed.updated)
    for item in feed.entries:
        entry = generator.add_entry(order="append")
        entry.id(item.url)
        entry.guid(item.url, permalink=True)
        entry.title(xml_text(item.title))
        entry.link(href=item.url, rel="alternate")
        entry.published(item.published)
        entry.updated(item.published)
        if item.summary:
            entry.summary(xml_text(item.summary))
        entry.content(xml_text(item.html), type="html")
    return generator


def atom(feed: Feed) -> bytes:
    """The feed as Atom 1.0 (RFC 4287)."""
    return bytes(_generator(feed, feed.atom_url).atom_str(pretty=True))


def rss(feed: Feed) -> bytes:
    """The feed as RSS 2.0."""
    return bytes(_generator(feed, feed.rss_url).rss_str(pretty=True))
