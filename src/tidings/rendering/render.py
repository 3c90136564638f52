"""Render one segment of a campaign: content -> blocks -> one template render -> skeleton.

`render_segment` is the whole pipeline for one segment (free, paid, …): select the passages
the segment sees, turn merge tags into slots, make Markdown or HTML safe, render the design
system's layout once, inline the CSS, derive the plain text from the same fragments, and
build the MIME skeleton. `SegmentRendering.personalise` then makes each recipient's message
without touching any of that again. `preview` is the same with sample values filled in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from markupsafe import Markup

from tidings.domain.errors import InvalidInput
from tidings.domain.presend import CLIP_BYTES, clip_warning
from tidings.rendering import content as body
from tidings.rendering.content import CampaignContent
from tidings.rendering.engine import TemplateEngine
from tidings.rendering.markup import (
    markdown_to_html,
    sanitise_html,
    segment_element_left_open,
    segments_in_html,
    select_html_for_segment,
)
from tidings.rendering.mime import ListInfo, MessageSkeleton, Sender
from tidings.rendering.plaintext import html_to_text, quote
from tidings.rendering.slots import SAMPLE_RECIPIENT, RecipientValues, SlotTable
from tidings.rendering.theme import DEFAULT_THEME, Theme
from tidings.rendering.tracking import LinkTracking, SegmentLinks, button_mark
from tidings.storage.campaign_links import StoredLink

# Gmail clips messages whose HTML is over about 102 KB, hiding the footer (and its unsubscribe
# link) behind "View entire message".
SIZE_WARNING_BYTES = CLIP_BYTES  # Gmail's clipping, warned a little before (CMP-8)
_BASE_URL = re.compile(r"https?://[^\s\"'<>]+")
_BUTTON_HREF = re.compile(r"(?:https?://|mailto:)[^\s\"'<>]+")


@dataclass(frozen=True, slots=True)
class Prose:
    html: Markup
    text: str
    kind: Literal["prose"] = "prose"


@dataclass(frozen=True, slots=True)
class Callout:
    children: tuple[Prose | Callout | ButtonBlock, ...]
    kind: Literal["callout"] = "callout"


@dataclass(frozen=True, slots=True)
class ButtonBlock:
    href: str
    label: str
    kind: Literal["button"] = "button"


TemplateBlock = Prose | Callout | ButtonBlock


@dataclass(frozen=True)
class SegmentRendering:
    """One segment's rendered campaign. `html` and `text` hold slot tokens, not values.
    When tracked, `links` are what to store before its first message goes out (ENG-2) and
    `tracking` makes each message's token."""

    segment: str
    subject: str
    preheader: str
    html: str
    text: str
    warnings: tuple[str, ...]
    slots: SlotTable = field(repr=False)
    skeleton: MessageSkeleton = field(repr=False)
    sender: Sender = field(repr=False)
    list_info: ListInfo = field(repr=False)
    links: tuple[StoredLink, ...] = field(default=(), repr=False)
    tracking: LinkTracking | None = field(default=None, repr=False)

    def personalise(self, recipient: RecipientValues, *, now: datetime | None = None) -> bytes:
        """The recipient's complete message, ready for SMTP; no template render."""
        return self.skeleton.personalise(recipient, now=now)

    def message_id_for(self, address: str) -> str:
        return self.skeleton.message_id_for(address)

    def html_for(self, recipient: RecipientValues) -> str:
        return self.slots.substitute(self.html, recipient, escape=True)

    def text_for(self, recipient: RecipientValues) -> str:
        return self.slots.substitute(self.text, recipient, escape=False)


@dataclass(frozen=True, slots=True)
class Preview:
    """A segment as one sample reader sees it (CMP-5): for the API, the UI and the CLI."""

    segment: str
    subject: str
    preheader: str
    html: str
    text: str
    warnings: tuple[str, ...]


def render_segment(
    content: CampaignContent,
    segment: str,
    *,
    sender: Sender,
    list_info: ListInfo,
    base_url: str,
    engine: TemplateEngine,
    now: datetime,
    theme: Theme = DEFAULT_THEME,
    tracking: LinkTracking | None = None,
    tracked_segment: str | None = None,
) -> SegmentRendering:
    """Render `content` for one segment: one template render, then a reusable skeleton.

    `now` is the default Date of the messages; `personalise(now=…)` can move it on. With
    `tracking` on, its links are rewritten and it carries the open pixel (ENG-2), counted for
    `tracked_segment` when given (an A/B test's `<tier>-v<n>`), else for `segment`.
    """
    if not body.SEGMENT_NAME.fullmatch(segment):
        raise InvalidInput(f"{segment!r} is not a segment name", field="segment")
    base_url = base_url.rstrip("/")
    if not _BASE_URL.fullmatch(base_url):
        raise InvalidInput("base_url must be an http(s) URL", field="base_url")
    slots = SlotTable(base_url=base_url)
    counted_as = tracked_segment or segment
    links = SegmentLinks(tracking, counted_as, slots, list_info.campaign_id, list_info.archive_url)
    blocks = segment_blocks(content, segment, slots, links)
    parts = engine.render(
        {
            "theme": theme,
            "subject": content.subject,
            "preheader": content.preheader,
            "newsletter_name": list_info.newsletter_name,
            "blocks": blocks,
            "content_text": "\n\n".join(_text(block) for block in blocks),
            "unsubscribe_url": slots.unsubscribe_url,
            "preferences_url": slots.preferences_url,
            "archive_url": list_info.archive_url,
            "tracking_pixel_url": links.pixel_url,
            "hidden_link_url": links.hidden_url,
        }
    )
    clipped = clip_warning(len(parts.html.encode("utf-8")))
    warnings = [] if clipped is None else [clipped]
    skeleton = MessageSkeleton(
        html_body=parts.html,
        text_body=parts.text,
        subject=content.subject,
        sender=sender,
        list_info=list_info,
        slots=slots,
        now=now,
    )
    return SegmentRendering(
        segment=counted_as,
        subject=content.subject,
        preheader=content.preheader,
        html=parts.html,
        text=parts.text,
        warnings=tuple(warnings),
        slots=slots,
        skeleton=skeleton,
        sender=sender,
        list_info=list_info,
        links=links.stored(),
        tracking=tracking if links.on else None,
    )


def segment_blocks(
    content: CampaignContent, segment: str, slots: SlotTable, links: SegmentLinks | None = None
) -> tuple[TemplateBlock, ...]:
    """The blocks of `content` that `segment` sees, merge tags turned into `slots`' tokens,
    links tracked by `links` (none when not given: untracked marks are only removed)."""
    nodes = body.select_for_segment(body.parse_body(content.body, content.body_format), segment)
    links = links or SegmentLinks(None, segment, slots, "")
    return tuple(_block(node, content.body_format, segment, slots, links) for node in nodes)


def preview(
    content: CampaignContent,
    segment: str,
    *,
    sender: Sender,
    list_info: ListInfo,
    base_url: str,
    engine: TemplateEngine,
    now: datetime,
    theme: Theme = DEFAULT_THEME,
    recipient: RecipientValues = SAMPLE_RECIPIENT,
) -> Preview:
    """The segment's HTML and text with a sample reader's values in place."""
    rendering = render_segment(
        content,
        segment,
        sender=sender,
        list_info=list_info,
        base_url=base_url,
        engine=engine,
        now=now,
        theme=theme,
    )
    return Preview(
        segment=segment,
        subject=rendering.subject,
        preheader=rendering.preheader,
        html=rendering.html_for(recipient),
        text=rendering.text_for(recipient),
        warnings=rendering.warnings,
    )


def check_content(content: CampaignContent) -> frozenset[str]:
    """Validate a campaign body at save time; return the segment names its blocks mention.

    Raises `InvalidInput` for a malformed block, an unknown merge tag, or a name used in a
    link, so authors hear about it when they save, not when the campaign sends.
    """
    nodes = body.parse_body(content.body, content.body_format)
    segments = set(body.segments_named(nodes))
    slots = SlotTable(base_url="https://example.invalid")
    untracked = SegmentLinks(None, "", slots, "")
    for node in _walk(nodes):
        if (
            content.body_format == "html"
            and isinstance(node, body.Chunk)
            and segment_element_left_open(node.source)
        ):
            raise InvalidInput(
                "an element with data-only or data-except must close before the next ::: line",
                field="body",
            )
        converted = _block(node, content.body_format, "", slots, untracked, select=False)
        if isinstance(converted, Prose) and content.body_format == "html":
            segments |= segments_in_html(str(converted.html))
    return frozenset(segments)


def _walk(nodes: tuple[body.Node, ...]) -> list[body.Chunk | body.Button]:
    leaves: list[body.Chunk | body.Button] = []
    for node in nodes:
        if isinstance(node, body.Block):
            leaves.extend(_walk(node.children))
        else:
            leaves.append(node)
    return leaves


def _block(
    node: body.Node,
    body_format: body.BodyFormat,
    segment: str,
    slots: SlotTable,
    links: SegmentLinks,
    *,
    select: bool = True,
) -> TemplateBlock:
    if isinstance(node, body.Block):
        children = tuple(
            _block(child, body_format, segment, slots, links) for child in node.children
        )
        return Callout(children=children)
    if isinstance(node, body.Button):
        source, untracked = button_mark(node.href)
        href = slots.expand_merge_tags(source)
        if not _BUTTON_HREF.fullmatch(href):
            raise InvalidInput("a button's URL must be an http(s) or mailto URL", field="body")
        slots.check_url_context(f'href="{href}"')
        label = slots.expand_merge_tags(node.label)
        return ButtonBlock(href=href if untracked else links.url(href), label=label)
    source = slots.expand_merge_tags(node.source)
    unsanitised = markdown_to_html(source) if body_format == "markdown" else source
    # Before as well as after: the sanitiser drops a URL made of a merge tag alone (it is
    # relative), and the author should hear why rather than find the link gone.
    slots.check_url_context(unsanitised)
    fragment = sanitise_html(unsanitised)
    if body_format == "html" and select:
        fragment = select_html_for_segment(fragment, segment)
    slots.check_url_context(fragment)
    fragment = links.anchors(fragment)
    return Prose(html=Markup(fragment), text=html_to_text(fragment))  # noqa: S704 - sanitised


def _text(block: TemplateBlock) -> str:
    if isinstance(block, Prose):
        return block.text
    if isinstance(block, ButtonBlock):
        return f"{block.label}: {block.href}"
    return quote("\n\n".join(_text(child) for child in block.children))
