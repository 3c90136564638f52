"""Reading an import CSV's shape (AUD-9): the delimiter, the records, and the header —
which field each column is.

Files come from other tools, so the header is read generously: the column names of the
common exports are aliases of ours (`import_vocabulary`), other columns become the
subscriber's custom fields (AUD-12: Mailchimp's merge fields such as `Phone Number` become
`phone_number`; listmonk's `attributes` and Buttondown's `metadata` JSON columns are read as
the objects they are), other tools' bookkeeping columns (ratings, ids, IP addresses,
timestamps) are ignored and reported, `--map column=field` names the rest, and a file of bare
addresses needs no header at all. Nothing here touches the database.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from tidings.audience.import_vocabulary import (
    BOOKKEEPING_COLUMNS,
    FIELDS,
    HEADER_ALIASES,
    JSON_ATTRIBUTE_COLUMNS,
    header_key,
)
from tidings.domain.errors import InvalidInput

DELIMITERS = (",", ";", "\t")
_ATTRIBUTE_KEY = re.compile(r"[^a-z0-9_-]+")
# Spreadsheets run a cell that starts with one of these as a formula. Export prefixes such a
# cell with an apostrophe (the spreadsheet convention for "text"); import takes it off again.
FORMULA_TRIGGERS = ("=", "+", "-", "@", "'")


@dataclass(frozen=True, slots=True)
class RowError:
    """A problem with one row: `line` is the CSV line the record starts on (the header is
    line 1), `field` ours, `column` and `value` as the file has them (None for the row as a
    whole). An error fails the row; a warning (same shape) skips one value only."""

    line: int
    field: str
    message: str
    column: str | None = None
    value: str | None = None


def neutralise_formula(cell: str) -> str:
    return "'" + cell if cell.startswith(FORMULA_TRIGGERS) else cell


def restore_formula(cell: str) -> str:
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(FORMULA_TRIGGERS) else cell


@dataclass(frozen=True, slots=True)
class Header:
    """Which field each position holds. `width` is the number of columns in the file;
    `ignored` the columns no field takes, as the file names them."""

    columns: Mapping[str, int]
    width: int
    ignored: tuple[str, ...] = ()
    has_header_row: bool = True
    # Custom fields (AUD-12): attribute key -> position; the file's names of those columns.
    attributes: Mapping[str, int] = field(default_factory=dict)
    attribute_columns: tuple[str, ...] = ()
    json_attributes: tuple[int, ...] = ()  # listmonk's `attributes`, Buttondown's `metadata`
    names: tuple[str, ...] = ()  # every column's name as the file writes it

    def name_of(self, field: str) -> str:
        """The file's name of the column read as `field` (the field itself if none)."""
        position = self.columns.get(field)
        if position is None or position >= len(self.names):
            return field
        return self.names[position]


def parse_column_map(entries: Iterable[str]) -> dict[str, str]:
    """`column=field` entries (`--map`) as {normalised column: field}; `column=` ignores it."""
    mapping: dict[str, str] = {}
    for entry in entries:
        column, sep, target = entry.partition("=")
        target = target.strip().lower()
        if not sep or not column.strip():
            raise InvalidInput(f"expected COLUMN=FIELD, got {entry!r}", field="map")
        if target and target not in FIELDS:
            raise InvalidInput(
                f"{target!r} is not a field; the fields are {', '.join(FIELDS)} "
                "(or nothing, to ignore the column)",
                field="map",
            )
        mapping[header_key(restore_formula(column))] = target
    return mapping


def read_header(fields: list[str], column_map: Mapping[str, str] | None = None) -> Header:
    """The file's first record as a header. A one-column file whose first cell is an
    address has no header: every line is an address. Columns no field takes are ignored;
    two columns for one field, or no `email`, fail the whole import before any row is read."""
    column_map = column_map or {}
    # A byte-order mark (Excel's "CSV UTF-8") is not part of the first column's name.
    names = [restore_formula(name.lstrip("\ufeff").strip()) for name in fields]
    keys = [header_key(name) for name in names]
    unknown_maps = sorted(set(column_map) - set(keys))
    if unknown_maps:
        raise InvalidInput(
            f"--map names column(s) the file does not have: {', '.join(unknown_maps)}",
            field="map",
        )
    if len(names) == 1 and keys[0] not in column_map and "@" in names[0]:
        return Header({"email": 0}, width=1, has_header_row=False, names=("email",))
    columns: dict[str, int] = {}
    ignored: list[str] = []
    attributes: dict[str, int] = {}
    attribute_columns: list[str] = []
    json_attributes: list[int] = []
    for position, (name, key) in enumerate(zip(names, keys, strict=True)):
        target = column_map[key] if key in column_map else HEADER_ALIASES.get(key, "")
        if key in column_map and not target:
            ignored.append(name)
            continue
        if not target:
            attribute = _attribute_key(key)
            if key in JSON_ATTRIBUTE_COLUMNS:
                json_attributes.append(position)
                attribute_columns.append(name)
            elif key in BOOKKEEPING_COLUMNS or not attribute or attribute in attributes:
                ignored.append(name)
            else:
                attributes[attribute] = position
                attribute_columns.append(name)
            continue
        if target in columns:
            raise InvalidInput(
                f"repeated column(s): {target} (columns {columns[target] + 1} and "
                f"{position + 1}); use --map COLUMN= to ignore one",
                field="header",
            )
        columns[target] = position
    if "email" not in columns:
        raise InvalidInput(
            f"the header must have an email column (found: {', '.join(names) or 'nothing'}); "
            "name it with --map COLUMN=email",
            field="header",
        )
    return Header(
        columns,
        width=len(names),
        ignored=tuple(ignored),
        attributes=attributes,
        attribute_columns=tuple(attribute_columns),
        json_attributes=tuple(json_attributes),
        names=tuple(names),
    )


def _attribute_key(key: str) -> str:
    """A column's name as a custom-field key usable in `{{ attribs.KEY }}` and `attr:KEY=…`:
    "Phone Number" is `phone_number`."""
    return _ATTRIBUTE_KEY.sub("_", key).strip("_")[:64]


def detect_delimiter(first_line: str) -> str:
    """`,`, `;` or tab: whichever the header line (or a lone address line) has most of,
    outside quotes. Spreadsheets in many locales write `;`."""
    counts = dict.fromkeys(DELIMITERS, 0)
    quoted = False
    for char in first_line:
        if char == '"':
            quoted = not quoted
        elif not quoted and char in counts:
            counts[char] += 1
    best = max(DELIMITERS, key=lambda delimiter: counts[delimiter])
    return best if counts[best] else ","


def csv_records(
    lines: Iterable[str], delimiter: str = ","
) -> Iterator[tuple[int, list[str]] | RowError]:
    """(starting line, fields) for each record, or a RowError for one the CSV reader cannot
    parse. Blank lines, and rows whose cells are all blank (spreadsheets add them), are
    skipped."""
    reader = csv.reader(lines, delimiter=delimiter)
    next_line = 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield RowError(next_line, "row", f"not valid CSV: {exc}")
            next_line = reader.line_num + 1
            continue
        line, next_line = next_line, reader.line_num + 1
        if any(field.strip() for field in fields):
            yield line, fields
