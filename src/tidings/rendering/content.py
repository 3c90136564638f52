"""Campaign content and its block syntax: segment blocks, callouts and buttons (CMP-2, AUD-11).

A body is Markdown or HTML with `:::` block lines, the same in both formats:

    ::: only paid comped        shown only to these segments
    ::: except paid             shown to every other segment
    ::: callout                 a highlighted aside (the design system's callout)
    ::: button https://…        a button; the block's text is its label
    :::                         closes the innermost open block

Blocks nest. The lines are read before Markdown or HTML is parsed, so a block boundary is
also a paragraph boundary. Inside a fenced code block (``` or ~~~) in Markdown, `:::` lines
are code, not blocks. Nothing here evaluates the content: it is split into lines and
chunks, never handed to a template engine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from tidings.domain.email_headers import check_header_values
from tidings.domain.errors import InvalidInput

BodyFormat = Literal["markdown", "html"]
SEGMENT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_BLOCK_LINE = re.compile(r" {0,3}:::[ \t]*(?P<kind>[A-Za-z_-]*)[ \t]*(?P<argument>.*?)[ \t]*")
# CommonMark fences: an opening run of 3+ backticks (whose info string has no backtick) or
# tildes; it closes only with a run of the same character at least as long and nothing after.
_FENCE_OPEN = re.compile(r" {0,3}(?P<fence>`{3,}(?=[^`]*$)|~{3,})")
_FENCE_CLOSE = re.compile(r" {0,3}(?P<fence>`{3,}|~{3,})[ \t]*")
MAX_BLOCK_DEPTH = 8
MAX_SUBJECT = 300
MAX_PREHEADER = 300


@dataclass(frozen=True, slots=True)
class CampaignContent:
    """What an author writes: subject and preheader (plain, one line) and the body."""

    subject: str
    preheader: str
    body: str
    body_format: BodyFormat = "markdown"

    def __post_init__(self) -> None:
        check_header_values({"subject": self.subject, "preheader": self.preheader})
        if not self.subject.strip():
            raise InvalidInput("subject must not be empty", field="subject")
        if len(self.subject) > MAX_SUBJECT:
            raise InvalidInput(f"subject is longer than {MAX_SUBJECT} characters", field="subject")
        if len(self.preheader) > MAX_PREHEADER:
            raise InvalidInput(
                f"preheader is longer than {MAX_PREHEADER} characters", field="preheader"
            )
        for field, value in (("subject", self.subject), ("preheader", self.preheader)):
            if "{{" in value:
                # Both are encoded once per segment; per-recipient text belongs in the body.
                raise InvalidInput(f"merge tags are not supported in the {field}", field=field)
        if self.body_format not in ("markdown", "html"):
            raise InvalidInput("body_format must be 'markdown' or 'html'", field="body_format")


@dataclass(frozen=True, slots=True)
class Chunk:
    """A run of Markdown or HTML source between block lines."""

    source: str


@dataclass(frozen=True, slots=True)
class Button:
    href: str
    label: str


@dataclass(frozen=True, slots=True)
class Block:
    """A `:::` block: `only`/`except` carry segment names, `callout` carries none."""

    kind: Literal["only", "except", "callout"]
    segments: frozenset[str]
    children: tuple[Node, ...]


Node = Chunk | Button | Block


@dataclass
class _Open:
    kind: str
    argument: str
    line: int
    children: list[Node]
    lines: list[str]


def parse_segment_names(argument: str, *, field: str = "body") -> frozenset[str]:
    """`paid, comped` or `paid comped` -> {"paid", "comped"}; each name must be a slug."""
    names = [name for name in re.split(r"[\s,]+", argument.strip()) if name]
    if not names:
        raise InvalidInput("a segment block names at least one segment", field=field)
    for name in names:
        if not SEGMENT_NAME.fullmatch(name):
            raise InvalidInput(
                f"{name!r} is not a segment name (lowercase letters, digits, '-', '_')",
                field=field,
            )
    return frozenset(names)


def parse_body(source: str, body_format: BodyFormat) -> tuple[Node, ...]:
    """The body as a tree of chunks and blocks; malformed block lines raise `InvalidInput`."""
    root = _Open("root", "", 0, [], [])
    stack = [root]
    fence: str | None = None  # the open code fence, if any: `:::` lines inside are code
    for number, line in enumerate(source.splitlines(), start=1):
        if body_format == "markdown":
            if fence is None:
                opening = _FENCE_OPEN.match(line)
                if opening:
                    fence = opening["fence"]
                    stack[-1].lines.append(line)
                    continue
            else:
                closing = _FENCE_CLOSE.fullmatch(line)
                if (
                    closing
                    and closing["fence"][0] == fence[0]
                    and len(closing["fence"]) >= len(fence)
                ):
                    fence = None
                stack[-1].lines.append(line)
                continue
        match = _BLOCK_LINE.fullmatch(line)
        if match is None:
            stack[-1].lines.append(line)
            continue
        _flush(stack[-1])
        kind, argument = match["kind"].lower(), match["argument"]
        if not kind:
            if len(stack) == 1:
                raise InvalidInput(f"line {number}: ':::' closes no open block", field="body")
            closed = stack.pop()
            stack[-1].children.append(_close(closed))
        elif kind in ("only", "except", "callout", "button"):
            if len(stack) > MAX_BLOCK_DEPTH:
                raise InvalidInput(
                    f"line {number}: blocks nest deeper than {MAX_BLOCK_DEPTH} levels", field="body"
                )
            stack.append(_Open(kind, argument, number, [], []))
        else:
            raise InvalidInput(
                f"line {number}: unknown block '::: {kind}' "
                "(expected only, except, callout or button)",
                field="body",
            )
    if len(stack) > 1:
        raise InvalidInput(
            f"line {stack[-1].line}: '::: {stack[-1].kind}' is never closed", field="body"
        )
    _flush(root)
    return tuple(root.children)


def _flush(open_block: _Open) -> None:
    if open_block.lines:
        text = "\n".join(open_block.lines)
        if text.strip():
            open_block.children.append(Chunk(text))
        open_block.lines.clear()


def _close(open_block: _Open) -> Node:
    where = f"line {open_block.line}: "
    if open_block.kind == "button":
        href = open_block.argument.strip()
        if not href or any(isinstance(child, Block | Button) for child in open_block.children):
            raise InvalidInput(
                where + "'::: button URL' holds a URL and a plain label", field="body"
            )
        label = " ".join(
            " ".join(child.source.split())
            for child in open_block.children
            if isinstance(child, Chunk)
        )
        if not label:
            raise InvalidInput(where + "a button needs a label", field="body")
        return Button(href=href, label=label)
    if open_block.kind == "callout":
        if open_block.argument.strip():
            raise InvalidInput(where + "'::: callout' takes no argument", field="body")
        return Block("callout", frozenset(), tuple(open_block.children))
    kind: Literal["only", "except"] = "only" if open_block.kind == "only" else "except"
    segments = parse_segment_names(open_block.argument)
    return Block(kind, segments, tuple(open_block.children))


def select_for_segment(nodes: tuple[Node, ...], segment: str) -> tuple[Chunk | Button | Block, ...]:
    """The nodes one segment sees: `only`/`except` resolved away, neighbouring chunks merged."""
    selected: list[Chunk | Button | Block] = []
    for node in nodes:
        if isinstance(node, Block) and node.kind != "callout":
            shown = (segment in node.segments) == (node.kind == "only")
            if shown:
                selected.extend(select_for_segment(node.children, segment))
        elif isinstance(node, Block):
            children = select_for_segment(node.children, segment)
            if children:  # a callout whose every passage is for other segments is not shown
                selected.append(Block("callout", node.segments, children))
        else:
            selected.append(node)
    merged: list[Chunk | Button | Block] = []
    for node in selected:
        if isinstance(node, Chunk) and merged and isinstance(merged[-1], Chunk):
            merged[-1] = Chunk(merged[-1].source + "\n\n" + node.source)
        else:
            merged.append(node)
    return tuple(merged)


def segments_named(nodes: tuple[Node, ...]) -> frozenset[str]:
    """Every segment a body's blocks mention: the versions of a campaign worth rendering."""
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, Block):
            names |= node.segments
            names |= segments_named(node.children)
    return frozenset(names)
