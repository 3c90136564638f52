"""Reading an import CSV (AUD-9): the header, each row's validation, per-row errors.

Nothing here touches the database. Error messages name the field and never quote the
email address: reports are printed and may be logged.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from tidings.audience.subscribers import validate_labels, validate_tier
from tidings.domain.audience import Address, normalise_email, validate_name
from tidings.domain.consent import SubscriptionState
from tidings.domain.errors import InvalidInput

COLUMNS = ("email", "name", "tier", "labels", "newsletter", "status", "created_at")
LABEL_SEPARATORS = (";", "|")
_STATUSES = {state.value: state for state in SubscriptionState}
# Spreadsheets run a cell that starts with one of these as a formula. Export prefixes such a
# cell with an apostrophe (the spreadsheet convention for "text"); import takes it off again.
FORMULA_TRIGGERS = ("=", "+", "-", "@", "'")


@dataclass(frozen=True, slots=True)
class RowError:
    line: int  # the CSV line the record starts on; the header is line 1
    field: str
    message: str


@dataclass(frozen=True, slots=True)
class ImportRow:
    """A valid row. `None` (and an empty `labels`) means the file left the field blank."""

    line: int
    address: Address
    name: str | None
    tier: str | None
    labels: tuple[str, ...]
    newsletter_id: int
    status: SubscriptionState
    created_at: datetime | None

    @property
    def unsubscribes(self) -> bool:
        return self.status is SubscriptionState.UNSUBSCRIBED


def neutralise_formula(cell: str) -> str:
    return "'" + cell if cell.startswith(FORMULA_TRIGGERS) else cell


def restore_formula(cell: str) -> str:
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(FORMULA_TRIGGERS) else cell


def read_header(fields: list[str]) -> dict[str, int]:
    """Column name -> position. Unknown or repeated columns, or no `email`, fail the whole
    import before any row is read."""
    # A byte-order mark (Excel's "CSV UTF-8") is not part of the first column's name.
    names = [restore_formula(field.lstrip("\ufeff").strip()).lower() for field in fields]
    unknown = [name for name in names if name not in COLUMNS]
    if unknown:
        raise InvalidInput(
            f"unknown column(s): {', '.join(unknown)}; the columns are {', '.join(COLUMNS)}",
            field="header",
        )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InvalidInput(f"repeated column(s): {', '.join(repeated)}", field="header")
    if "email" not in names:
        raise InvalidInput("the header must have an email column", field="header")
    return {name: position for position, name in enumerate(names)}


class RowReader:
    """Validates rows one at a time and remembers what it needs to spot repeats: an address
    may appear once per newsletter, and its rows must not contradict each other."""

    def __init__(
        self,
        columns: Mapping[str, int],
        *,
        newsletter_ids: Mapping[str, int],
        default_newsletter: str,
        now: datetime,
    ) -> None:
        self._columns = columns
        self._newsletter_ids = newsletter_ids
        self._default_newsletter = default_newsletter
        self._now = now
        self._line_of: dict[tuple[str, int], int] = {}
        # address key -> (first line, name given so far, tier given so far)
        self._subscriber_fields: dict[str, tuple[int, str | None, str | None]] = {}

    def read(self, line: int, fields: list[str]) -> ImportRow | list[RowError]:
        errors: list[RowError] = []

        def problem(field: str, message: str) -> None:
            errors.append(RowError(line, field, message))

        if len(fields) > len(self._columns):
            problem("row", f"has {len(fields)} values but the header has {len(self._columns)}")
            return errors
        cell = self._cells(fields)
        address = name = tier = created_at = None
        labels: tuple[str, ...] = ()
        try:
            if not cell.get("email"):
                raise InvalidInput("email is required", field="email")
            address = normalise_email(cell["email"])
        except InvalidInput as exc:
            problem("email", exc.detail)
        try:
            name = validate_name(cell.get("name") or None)
        except InvalidInput as exc:
            problem("name", exc.detail)
        try:
            tier = validate_tier(cell["tier"].lower()) if cell.get("tier") else None
        except InvalidInput as exc:
            problem("tier", exc.detail)
        try:
            labels = tuple(validate_labels(_split_labels(cell.get("labels", ""))))
        except InvalidInput as exc:
            problem("labels", exc.detail)
        slug = cell.get("newsletter") or self._default_newsletter
        newsletter_id = self._newsletter_ids.get(slug)
        if newsletter_id is None:
            problem("newsletter", "no newsletter with that slug")
        status = _STATUSES.get((cell.get("status") or SubscriptionState.PENDING).lower())
        if status is None:
            problem("status", "status must be pending, confirmed or unsubscribed")
        try:
            created_at = self._created_at(cell.get("created_at", ""))
        except ValueError as exc:
            problem("created_at", str(exc))
        if errors:
            return errors
        assert address is not None
        assert newsletter_id is not None
        assert status is not None
        repeat = self._repeat(line, address.key, newsletter_id, name, tier)
        if repeat is not None:
            return [repeat]
        return ImportRow(line, address, name, tier, labels, newsletter_id, status, created_at)

    def _cells(self, fields: list[str]) -> dict[str, str]:
        cells = {}
        for name, position in self._columns.items():
            if position < len(fields):
                cell = fields[position].strip()
                cells[name] = restore_formula(cell) if cell.startswith("'") else cell
        return cells

    def _created_at(self, text: str) -> datetime | None:
        if not text:
            return None
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError("created_at must be an ISO-8601 date or date-time") from None
        # A time without an offset is taken as UTC.
        parsed = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
        if parsed > self._now:
            raise ValueError("created_at must not be in the future")
        return parsed

    def _repeat(
        self, line: int, key: str, newsletter_id: int, name: str | None, tier: str | None
    ) -> RowError | None:
        earlier = self._line_of.get((key, newsletter_id))
        if earlier is not None:
            return RowError(line, "email", f"repeats line {earlier} (same address and newsletter)")
        first_line, known_name, known_tier = self._subscriber_fields.get(key, (line, None, None))
        if name is not None and known_name is not None and name != known_name:
            return RowError(line, "name", f"differs from line {first_line} for the same address")
        if tier is not None and known_tier is not None and tier != known_tier:
            return RowError(line, "tier", f"differs from line {first_line} for the same address")
        self._line_of[key, newsletter_id] = line
        self._subscriber_fields[key] = (first_line, known_name or name, known_tier or tier)
        return None


def _split_labels(text: str) -> list[str]:
    for separator in LABEL_SEPARATORS[1:]:
        text = text.replace(separator, LABEL_SEPARATORS[0])
    return [label for label in text.split(LABEL_SEPARATORS[0]) if label.strip()]


def csv_records(lines: Iterable[str]) -> Iterator[tuple[int, list[str]] | RowError]:
    """(starting line, fields) for each record, or a RowError for one the CSV reader cannot
    parse. Blank lines, and rows whose cells are all blank (spreadsheets add them), are
    skipped."""
    reader = csv.reader(lines)
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
