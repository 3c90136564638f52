"""What checks before sending (CMP-8) read off one segment's rendering: its content's images
without alt text, its links and images that are not https, its merge tags without a fallback,
and whether the message carries an unsubscribe link. The content is read as its author wrote
it (untracked URLs); the size is the message as it goes out (`domain.presend.size_finding`)."""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser

from tidings.domain.presend import CheckCode, Finding
from tidings.rendering.content import CampaignContent
from tidings.rendering.render import ButtonBlock, Callout, Prose, SegmentRendering, TemplateBlock
from tidings.rendering.render import segment_blocks as render_blocks
from tidings.rendering.slots import ATTRIBUTES_FIELD, NAME_FIELDS, UNSUBSCRIBE_PATH, SlotTable

_SAFE_SCHEMES = ("https://", "mailto:", "tel:", "#")


@dataclass(frozen=True, slots=True)
class MissingFallback:
    """A merge tag that shows a name or a custom field with no fallback: `field` is `name`,
    `first_name` or `attribs` (then `key` names the field)."""

    field: str
    key: str = ""

    @property
    def tag(self) -> str:
        return f"{self.field}.{self.key}" if self.key else self.field


class _Elements(HTMLParser):
    """Every <img> (its src and alt) and <a href> of a sanitised fragment."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.images: list[tuple[str, str | None]] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "img":
            self.images.append(((found.get("src") or "").strip(), found.get("alt")))
        elif tag == "a" and found.get("href"):
            self.links.append((found["href"] or "").strip())


def _elements(blocks: tuple[TemplateBlock, ...], parser: _Elements) -> None:
    for block in blocks:
        if isinstance(block, Prose):
            parser.feed(str(block.html))
        elif isinstance(block, ButtonBlock):
            parser.links.append(block.href)
        elif isinstance(block, Callout):
            _elements(block.children, parser)


def _insecure(url: str, slots: SlotTable) -> bool:
    """An http:// URL (or one of another scheme a reader cannot trust); a URL made of a merge
    tag is the recipient's own value, not checked here."""
    lowered = url.lower()
    return not lowered.startswith(_SAFE_SCHEMES) and slots.pattern.search(url) is None


def content_findings(
    content: CampaignContent, segment: str
) -> tuple[list[Finding], list[MissingFallback]]:
    """The segment's content as its author wrote it: images without alt text, links and
    images that are not https (one finding each, listing up to three), and the merge tags
    without a fallback (to be counted against the audience by the caller)."""
    slots = SlotTable(base_url="https://example.invalid")
    blocks = render_blocks(content, segment, slots)
    parser = _Elements()
    _elements(blocks, parser)
    parser.close()
    findings: list[Finding] = []
    no_alt = [src for src, alt in parser.images if not (alt or "").strip()]
    if no_alt:
        findings.append(
            Finding(
                CheckCode.IMAGE_WITHOUT_ALT,
                f"{_count(len(no_alt), 'image')} without alt text ({_some(no_alt)}): readers "
                "with images off or a screen reader get nothing in their place.",
                segments=(segment,),
            )
        )
    for code, urls, what in (
        (CheckCode.INSECURE_LINK, parser.links, "link"),
        (CheckCode.INSECURE_IMAGE, [src for src, _ in parser.images], "image"),
    ):
        insecure = sorted({url for url in urls if url and _insecure(url, slots)})
        if insecure:
            findings.append(
                Finding(
                    code,
                    f"{_count(len(insecure), what)} not https ({_some(insecure)}): mail "
                    "clients warn about or block them, and anyone on the way can change them.",
                    segments=(segment,),
                )
            )
    missing = sorted(
        {
            MissingFallback(slot.field, slot.key)
            for slot in slots.slots
            if (slot.field in NAME_FIELDS or slot.field == ATTRIBUTES_FIELD) and not slot.fallback
        },
        key=lambda found: found.tag,
    )
    return findings, missing


def unsubscribe_finding(rendering: SegmentRendering, segment: str) -> Finding | None:
    """The message as it goes out carries no unsubscribe link (a changed template)."""
    if any(slot.field == "unsubscribe_token" for slot in rendering.slots.slots) and (
        UNSUBSCRIBE_PATH in rendering.html
    ):
        return None
    return Finding(
        CheckCode.NO_UNSUBSCRIBE,
        "The message has no unsubscribe link in its body: the law in most places and every "
        "large mailbox provider require one.",
        segments=(segment,),
    )


def _count(count: int, what: str) -> str:
    return f"{count} {what}" if count == 1 else f"{count} {what}s"


def _some(urls: list[str]) -> str:
    shown = ", ".join(urls[:3]) or "no source"
    return shown if len(urls) <= 3 else f"{shown} and {len(urls) - 3} more"
