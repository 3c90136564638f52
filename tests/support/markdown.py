"""Reading the tables of docs/*.md, so docs tests compare the rows a reader sees with the code
(not merely find a name somewhere on the page)."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).parents[2] / "docs"
_HEADING = re.compile(r"^#+\s+(.*?)\s*$")


def table(page: str, heading: str) -> list[dict[str, str]]:
    """The first table under `heading` in docs/`page`, one {column: cell} per row. A cell that
    is one code span (`name`) is given without its backticks."""
    lines = (DOCS / page).read_text().splitlines()
    start = next(
        (n for n, line in enumerate(lines) if (m := _HEADING.match(line)) and m[1] == heading),
        None,
    )
    assert start is not None, f"{page} has no heading {heading!r}"
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if _HEADING.match(line):
            break
        if line.startswith("|"):
            rows.append([_cell(cell) for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    assert len(rows) > 2, f"no table under {heading!r} in {page}"
    header, _rule, *body = rows
    return [dict(zip(header, row, strict=True)) for row in body]


def _cell(text: str) -> str:
    text = text.strip()
    if re.fullmatch(r"`[^`]+`", text):
        return text[1:-1]
    return text
