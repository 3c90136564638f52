"""Tracked links and the open pixel of one segment (ENG-2): rewritten once, at render time.

When a newsletter tracks (`aggregate` or `per_person`), every http(s) link of a segment's
content (anchors and buttons) becomes `<public_url>/c/<link token>/<message token>`: the link
token names the stored link (campaign, segment, number) and is signed here, once per segment;
the message token is one more per-recipient slot (`tracking_token`), substituted into the
serialised message like the unsubscribe token, in HTML and in the plain text derived from it.
Links are numbered 1..n in order of first appearance; the same URL twice keeps one number.

Never rewritten: mailto and other non-http links, any URL holding a per-recipient value (the
unsubscribe and preferences links among them), the issue's archive URL, and links the author
marks untracked:

- HTML: `<a href="…" data-track="off">` (the attribute never reaches the reader);
- Markdown: the link title `notrack`, as in `[text](https://… "notrack")` (dropped likewise);
- a button: `::: button https://… notrack`.

The segment also gets the open pixel (number 0: a 1x1 image with an empty alt, HTML only) and
one hidden link (the last number) that no person can see or reach — only machines that fetch
every URL of a message follow it. With tracking off nothing here adds anything: the markers
are removed and the message is what it always was.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

from tidings.domain.errors import InvalidInput
from tidings.domain.tracking import HitKind, TrackingMode, TrackingSigner, tracked_url
from tidings.rendering.slots import PREFERENCES_PATH, UNSUBSCRIBE_PATH, Slot, SlotTable
from tidings.storage.campaign_links import StoredLink

UNTRACKED_ATTRIBUTE = "data-track"
UNTRACKED_VALUES = frozenset({"off", "false", "no"})
UNTRACKED_TITLE = "notrack"
TRACKING_SLOT = Slot("tracking_token")
# The sanitiser's output: every attribute value double-quoted, a `"` inside escaped, so a
# value never holds the quote that ends it (but may hold `>`).
_ANCHOR = re.compile(r'<a((?:\s+[^\s="<>/]+(?:="[^"]*")?)*)(\s*)>')
_ATTRIBUTE = re.compile(r'\s+([^\s="<>/]+)(?:="([^"]*)")?')
_TRACKABLE = re.compile(r"https?://", re.IGNORECASE)


@lru_cache(maxsize=4)
def tracking_signer(secret: str) -> TrackingSigner:
    """One signer per site secret: its key schedule is done once, not per segment."""
    return TrackingSigner(secret)


def button_mark(href: str) -> tuple[str, bool]:
    """A button's URL without its `notrack` word, and whether the author marked it so."""
    url, _, mark = href.rpartition(" ")
    if url.strip() and mark == UNTRACKED_TITLE:
        return url.rstrip(), True
    return href, False


@dataclass(frozen=True, slots=True)
class LinkTracking:
    """How a segment is tracked: the newsletter's mode and the signer of both token parts."""

    mode: TrackingMode
    signer: TrackingSigner

    @property
    def on(self) -> bool:
        return self.mode is not TrackingMode.OFF

    def message_token(
        self, campaign_id: int, now: datetime, recipient_id: int, *, consented: bool
    ) -> str:
        """One message's token: it names the recipient only for a consented subscriber of a
        `per_person` newsletter; everyone else gets an anonymous one (ENG-1)."""
        if not self.on:
            return ""
        person = consented and self.mode is TrackingMode.PER_PERSON
        return self.signer.message_token(campaign_id, now, recipient_id if person else None)


@dataclass
class SegmentLinks:
    """The tracked links of one segment rendering, numbered as its blocks are rendered."""

    tracking: LinkTracking | None
    segment: str
    slots: SlotTable
    campaign_id: str
    archive_url: str | None = None
    _numbers: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.on and not self.campaign_id.isdigit():
            raise InvalidInput("a tracked campaign's id must be a number", field="campaign_id")
        base = self.slots.base_url
        self._never = (base + UNSUBSCRIBE_PATH, base + PREFERENCES_PATH)

    @property
    def on(self) -> bool:
        return self.tracking is not None and self.tracking.on

    def url(self, href: str) -> str:
        """`href` as the message carries it: tracked, or as it is when it must not be."""
        if not self.on or not self._trackable(href):
            return href
        number = self._numbers.setdefault(href, len(self._numbers) + 1)
        return self._tracked(HitKind.CLICK, number)

    def anchors(self, fragment: str) -> str:
        """Every anchor of a sanitised fragment rewritten, untracked marks removed."""
        if not self.on and UNTRACKED_ATTRIBUTE not in fragment and UNTRACKED_TITLE not in fragment:
            return fragment
        return _ANCHOR.sub(self._anchor, fragment)

    @property
    def pixel_url(self) -> str | None:
        return self._tracked(HitKind.OPEN, 0) if self.on else None

    @property
    def hidden_url(self) -> str | None:
        return self._tracked(HitKind.CLICK, len(self._numbers) + 1) if self.on else None

    def stored(self) -> tuple[StoredLink, ...]:
        """The links to store before the first message goes out: pixel, links, hidden one.
        Call it after the last block is rendered (the hidden link's number follows theirs)."""
        if not self.on:
            return ()
        links = [StoredLink(number, url) for url, number in self._numbers.items()]
        hidden = StoredLink(len(self._numbers) + 1, self.slots.base_url, hidden=True)
        return (StoredLink(0, ""), *links, hidden)

    def _trackable(self, href: str) -> bool:
        return (
            _TRACKABLE.match(href) is not None
            and self.slots.pattern.search(href) is None
            and href != self.archive_url
            and not href.startswith(self._never)
        )

    def _tracked(self, kind: HitKind, number: int) -> str:
        assert self.tracking is not None
        link = self.tracking.signer.link_token(int(self.campaign_id), self.segment, number)
        return tracked_url(self.slots.base_url, kind, link, self.slots.token(TRACKING_SLOT))

    def _anchor(self, match: re.Match[str]) -> str:
        kept: list[str] = []
        href_at, href = -1, ""
        untracked = False
        for attribute in _ATTRIBUTE.finditer(match[1]):
            name, value = attribute[1].lower(), attribute[2]
            if name == UNTRACKED_ATTRIBUTE:
                untracked = untracked or (value or "").strip().lower() in UNTRACKED_VALUES
                continue
            if name == "title" and (value or "").strip().lower() == UNTRACKED_TITLE:
                untracked = True
                continue
            if name == "href" and value is not None:
                href_at, href = len(kept), html.unescape(value)
            kept.append(attribute[0])
        if href_at >= 0 and not untracked:
            tracked = self.url(href)
            if tracked != href:
                kept[href_at] = f' href="{html.escape(tracked)}"'
        return f"<a{''.join(kept)}{match[2]}>"
