"""Sanitised HTML fragments to the plain-text alternative, links kept as `text (url)`.

The text part is generated from the same fragment as the HTML part, so the two can never say
different things. It reads like a hand-written plain email: paragraphs wrapped at 76
columns, headings underlined, lists with `-` or numbers, quotes and callouts with `> `.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from html.parser import HTMLParser

WIDTH = 76
_BLOCKS = frozenset(
    {"p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote", "pre"}
    | {"table", "caption", "tr", "hr", "figure", "figcaption", "dl", "dt", "dd"}
)
_BREAK = "\ue000"  # stands for <br> until lines are wrapped
_SPACES = re.compile(r"[ \t\n\r\f\v]+")


@dataclass
class _Paragraph:
    prefix: str  # quote markers and list indentation for every line
    first_prefix: str  # the same, with the list marker on the first line
    pieces: list[str] = field(default_factory=list)
    underline: str = ""
    preformatted: bool = False
    # Items of one list, rows of one table: follow their neighbour without a blank line.
    group: int | None = None

    def flat(self) -> str:
        return _SPACES.sub(" ", "".join(self.pieces))


def html_to_text(fragment: str) -> str:
    """Plain text for a sanitised HTML fragment; blocks separated by one blank line."""
    converter = _TextConverter()
    converter.feed(fragment)
    converter.close()
    return converter.result()


def quote(text: str) -> str:
    """`text` with `> ` before every line, for callouts and quotes in the text part."""
    return "\n".join(("> " + line).rstrip() for line in text.splitlines())


class _TextConverter(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[_Paragraph] = []
        self.current: _Paragraph | None = None
        self.quote_depth = 0
        # Per open list: [item counter (-1 when unordered), group number].
        self.lists: list[list[int]] = []
        self.pending_marker = ""
        self.pre_depth = 0
        self.links: list[tuple[str, list[str]]] = []  # open <a>: href and the words inside
        self.cells: list[str] = []
        self.in_row = False
        self.groups = 0  # numbers each list and table, so two lists in a row stay apart
        self.table_group: int | None = None

    # -- structure ------------------------------------------------------------------------
    def _prefix(self) -> str:
        return "> " * self.quote_depth + "   " * max(len(self.lists) - 1, 0)

    def _paragraph(self) -> _Paragraph:
        if self.current is None:
            prefix = self._prefix()
            marker, self.pending_marker = self.pending_marker, ""
            first = prefix + marker if marker else prefix
            self.current = _Paragraph(prefix + " " * len(marker), first)
            self.current.preformatted = self.pre_depth > 0
            if marker and self.lists:
                self.current.group = self.lists[0][1]  # nested lists join their outer list
            elif self.in_row:
                self.current.group = self.table_group
            self.paragraphs.append(self.current)
        return self.current

    def _end_paragraph(self) -> None:
        self.current = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag in _BLOCKS:
            self._end_paragraph()
        if tag == "blockquote":
            self.quote_depth += 1
        elif tag in ("ul", "ol"):
            self.groups += 1
            self.lists.append([0 if tag == "ol" else -1, self.groups])
        elif tag == "li" and self.lists:
            counter = self.lists[-1]
            if counter[0] >= 0:
                counter[0] += 1
                self.pending_marker = f"{counter[0]}. "
            else:
                self.pending_marker = "- "
        elif tag == "pre":
            self.pre_depth += 1
        elif tag == "hr":
            self._paragraph().pieces.append("-" * 24)
            self._end_paragraph()
        elif tag == "br":
            self._add_text(_BREAK)
        elif tag == "a":
            self.links.append((attributes.get("href") or "", []))
        elif tag == "img" and attributes.get("alt"):
            self._add_text(f"[{attributes['alt']}]")
        elif tag == "table":
            self.groups += 1
            self.table_group = self.groups
        elif tag == "tr":
            self.in_row = True
        elif tag in ("td", "th") and self.cells and self.current is not None:
            self._add_text(" | ")
        if tag in ("td", "th"):
            self.cells.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self.links:
            href, pieces = self.links.pop()
            text = _SPACES.sub(" ", "".join(pieces)).strip()
            if href and href not in (text, "mailto:" + text):
                text = f"{text} ({href})" if text else href
            self._add_text(text)
        elif tag in ("h1", "h2") and self.current is not None:
            length = len(self.current.flat().strip())
            self.current.underline = ("=" if tag == "h1" else "-") * min(length, WIDTH)
        elif tag == "blockquote":
            self.quote_depth = max(self.quote_depth - 1, 0)
        elif tag in ("ul", "ol") and self.lists:
            self.lists.pop()
        elif tag == "pre":
            self.pre_depth = max(self.pre_depth - 1, 0)
        elif tag == "tr":
            self.cells.clear()
            self.in_row = False
        if tag in _BLOCKS:
            self._end_paragraph()

    def handle_data(self, data: str) -> None:
        if self.pre_depth:
            self._paragraph().pieces.append(data)
        elif self.links:
            self.links[-1][1].append(data)
        elif data.strip() or self.current is not None:
            self._add_text(data)

    def _add_text(self, text: str) -> None:
        if self.links:
            self.links[-1][1].append(text)
        else:
            self._paragraph().pieces.append(text)

    # -- output ---------------------------------------------------------------------------
    def result(self) -> str:
        out: list[str] = []
        previous_group: int | None = None
        for paragraph in self.paragraphs:
            text = _render(paragraph)
            if not text.strip():
                continue
            if out:
                same_group = paragraph.group is not None and paragraph.group == previous_group
                out.append("\n" if same_group else "\n\n")
            out.append(text)
            previous_group = paragraph.group
        return "".join(out)


def _render(paragraph: _Paragraph) -> str:
    if paragraph.preformatted:
        body = "".join(paragraph.pieces).strip("\n")
        return "\n".join((paragraph.prefix + line).rstrip() for line in body.splitlines())
    lines: list[str] = []
    for number, piece in enumerate(paragraph.flat().split(_BREAK)):
        first = paragraph.first_prefix if number == 0 else paragraph.prefix
        wrapped = textwrap.wrap(
            piece.strip(),
            WIDTH,
            initial_indent=first,
            subsequent_indent=paragraph.prefix,
            break_long_words=False,
            break_on_hyphens=False,
        )
        lines.extend(wrapped or [first.rstrip()])
    if paragraph.underline:
        lines.append(paragraph.prefix + paragraph.underline)
    return "\n".join(lines)
