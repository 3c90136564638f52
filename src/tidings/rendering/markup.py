"""Content source to safe HTML fragments: Markdown via markdown-it, HTML via the nh3 sanitiser.

Markdown runs the CommonMark preset with tables and raw HTML off, so Markdown authors cannot
inject markup. HTML content keeps a newsletter's tag set (text, lists, tables, images, links)
and loses scripts, styles, event handlers, non-web URL schemes and every URL that is not
absolute: a relative (`x`) or scheme-less (`//evil.example/x`) link means nothing in a mail
client and would resolve against whichever page shows it, the archive's own site included.
Merge-tag links (`{{ unsubscribe_url }}`) are absolute before they get here. HTML authors
can also mark an element for some segments with `data-only="paid"` or `data-except="paid"`;
those elements are kept or dropped here per segment, and the attributes never reach the reader.
"""

from __future__ import annotations

import html
from functools import cache
from html.parser import HTMLParser

import nh3
from markdown_it import MarkdownIt

from tidings.rendering.content import parse_segment_names

_TAGS = frozenset(
    [
        "a",
        "abbr",
        "b",
        "blockquote",
        "br",
        "caption",
        "cite",
        "code",
        "dd",
        "del",
        "div",
        "dl",
        "dt",
        "em",
        "figcaption",
        "figure",
        "h1",
        "h2",
        "h3",
        "h4",
        "hr",
        "i",
        "img",
        "ins",
        "kbd",
        "li",
        "mark",
        "ol",
        "p",
        "pre",
        "q",
        "s",
        "small",
        "span",
        "strong",
        "sub",
        "sup",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "u",
        "ul",
    ]
)
_SEGMENT_ATTRIBUTES = frozenset({"data-only", "data-except"})
_ATTRIBUTES = {
    "*": set(_SEGMENT_ATTRIBUTES),
    # data-track="off": an author's untracked link, read and removed by `tracking.py`.
    "a": {"href", "title", "data-track"},
    "img": {"src", "alt", "width", "height", "title"},
    "td": {"colspan", "rowspan", "align"},
    "th": {"colspan", "rowspan", "align", "scope"},
    "ol": {"start"},
}
# The design system's content components, usable from HTML as classes.
_CLASSES = {"div": {"callout"}, "a": {"button"}, "p": {"lead"}}
_URL_SCHEMES = {"http", "https", "mailto"}
_VOID = frozenset({"br", "hr", "img", "wbr", "col", "area"})


@cache
def _markdown() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def markdown_to_html(source: str) -> str:
    rendered: str = _markdown().render(source)
    return rendered


def sanitise_html(source: str) -> str:
    return nh3.clean(
        source,
        tags=set(_TAGS),
        attributes={tag: set(names) for tag, names in _ATTRIBUTES.items()},
        allowed_classes={tag: set(names) for tag, names in _CLASSES.items()},
        url_schemes=set(_URL_SCHEMES),
        url_relative="deny",
        link_rel=None,
    )


def select_html_for_segment(fragment: str, segment: str) -> str:
    """Drop elements whose `data-only`/`data-except` excludes `segment`; strip those attributes.

    `fragment` must come from `sanitise_html`, whose output is well formed, so counting open
    and close tags is enough to find where a dropped element ends.
    """
    if "data-only" not in fragment and "data-except" not in fragment:
        return fragment
    selector = _SegmentSelector(segment)
    selector.feed(fragment)
    selector.close()
    return "".join(selector.out)


def segments_in_html(fragment: str) -> frozenset[str]:
    """Segment names mentioned by `data-only`/`data-except` attributes of sanitised HTML."""
    selector = _SegmentSelector("")
    selector.feed(fragment)
    selector.close()
    return frozenset(selector.mentioned)


def segment_element_left_open(fragment: str) -> bool:
    """True when an element carrying `data-only`/`data-except` is not closed within
    `fragment`. Each chunk between `:::` lines is sanitised on its own, which would close
    such an element early and show what follows to every segment."""
    tracker = _OpenElements()
    tracker.feed(fragment)
    tracker.close()
    return any(is_segment for _, is_segment in tracker.stack)


class _OpenElements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _VOID:
            self.stack.append((tag, any(name in _SEGMENT_ATTRIBUTES for name, _ in attrs)))

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self.stack) - 1, -1, -1):
            if self.stack[index][0] == tag:
                del self.stack[index:]
                return


class _SegmentSelector(HTMLParser):
    def __init__(self, segment: str) -> None:
        super().__init__(convert_charrefs=False)
        self.segment = segment
        self.out: list[str] = []
        self.mentioned: set[str] = set()
        self._skip_depth = 0  # > 0 while inside an element this segment does not see

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        void = tag in _VOID
        if self._skip_depth:
            self._skip_depth += 0 if void else 1
            return
        shown = True
        kept: list[str] = []
        for name, value in attrs:
            if name in _SEGMENT_ATTRIBUTES:
                segments = parse_segment_names(value or "")
                self.mentioned |= segments
                shown = shown and ((self.segment in segments) == (name == "data-only"))
            else:
                kept.append(f' {name}="{html.escape(value or "")}"')
        if not shown:
            self._skip_depth = 0 if void else 1
            return
        self.out.append(f"<{tag}{''.join(kept)}>")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if self._skip_depth:
            self._skip_depth -= 1
        elif tag not in _VOID:
            self.out.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        if not self._skip_depth:
            self.out.append(html.escape(data, quote=False))

    def handle_entityref(self, name: str) -> None:
        if not self._skip_depth:
            self.out.append(f"&{name};")

    def handle_charref(self, name: str) -> None:
        if not self._skip_depth:
            self.out.append(f"&#{name};")
