"""docs/architecture.md's map of SPEC ids holds: every id is listed, every path it names exists."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "docs" / "architecture.md"
SPEC_IDS = ROOT / "docs" / "spec-ids.txt"
SECTION = "## Where each part of SPEC.md lives"

ID = re.compile(r"\b([A-Z]+)-(\d+)(?:\.\.(\d+))?")
BACKTICKED = re.compile(r"`([^`]+)`")
BRACES = re.compile(r"\{([^}]*)\}")


def _rows() -> list[tuple[str, str]]:
    """The (ids, where) cells of the map's table, header and rule left out."""
    text = MAP.read_text()
    assert SECTION in text, f"docs/architecture.md lost its section {SECTION!r}"
    rows = []
    for line in text.split(SECTION, 1)[1].splitlines():
        if not line.startswith("| ") or line.startswith(("| SPEC |", "| --- |")):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows.append((cells[0], cells[1]))
    return rows


def _mapped_ids(cell: str) -> set[str]:
    """The ids a first cell names, ranges such as `SND-1..16` expanded."""
    ids = set()
    for prefix, first, last in ID.findall(cell):
        for number in range(int(first), int(last or first) + 1):
            ids.add(f"{prefix}-{number}")
    return ids


def _paths(cell: str) -> list[str]:
    """The repository paths a where-cell names: `storage/{a,b}.py` expanded, anchors dropped."""
    paths = []
    for token in BACKTICKED.findall(cell):
        if " " in token or token.startswith("/") or ("/" not in token and "." not in token):
            continue  # a command, a URL path or a name, not a file
        if "/" not in token and not token.endswith((".py", ".md")):
            continue  # a dotted name such as `JobQueue.fenced`
        token = token.split("#", 1)[0]
        match = BRACES.search(token)
        if match is None:
            paths.append(token)
            continue
        for part in match.group(1).split(","):
            paths.append(token[: match.start()] + part + token[match.end() :])
    return paths


def _exists(path: str) -> bool:
    """A path (or a glob such as `devservers/dev_*.py`) under src/tidings or the repository."""
    return any(any(base.glob(path)) for base in (ROOT / "src" / "tidings", ROOT))


def test_every_spec_id_is_mapped() -> None:
    """A requirement missing from the map is one a newcomer cannot find the code for."""
    listed = [
        line.strip()
        for line in SPEC_IDS.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert len(listed) > 90, "docs/spec-ids.txt lost its ids"
    mapped = set().union(*(_mapped_ids(ids) for ids, _ in _rows()))
    assert [spec_id for spec_id in listed if spec_id not in mapped] == []


def test_the_map_names_no_id_the_spec_lacks() -> None:
    """A mistyped or retired id in the map points a reader at a requirement that is not there."""
    listed = {line.strip() for line in SPEC_IDS.read_text().splitlines() if line[:1].isalpha()}
    mapped = set().union(*(_mapped_ids(ids) for ids, _ in _rows()))
    assert sorted(mapped - listed) == []


def test_every_mapped_path_exists() -> None:
    """A path the map names that has moved sends a reader to a file that is not there."""
    named = [path for _, where in _rows() for path in _paths(where)]
    assert len(named) > 50, "the map's table names no paths: did its format change?"
    assert [path for path in named if not _exists(path)] == []


def test_a_row_names_code_or_says_it_is_not_built() -> None:
    """A row with neither a path nor "not built yet" maps an id to nothing."""
    empty = [
        ids for ids, where in _rows() if not _paths(where) and not where.startswith("not built yet")
    ]
    assert empty == []
