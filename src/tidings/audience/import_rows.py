"""Reading an import CSV (AUD-9): the delimiter, the header, each row's validation, per-row
errors.

Files come from other tools, so the header is read generously: the column names of the common
exports (Mailchimp, Substack, Ghost, listmonk) are aliases of ours, other columns become the
subscriber's custom fields (AUD-12: Mailchimp's merge fields such as `Phone Number` become
`phone_number`; listmonk's `attributes` JSON column is read as the object it is), other tools'
bookkeeping columns (ratings, ids, IP addresses, timestamps) are ignored and reported,
`--map column=field` names the rest, and a file of bare addresses needs no header at all.
Nothing here touches the database. Error messages name the field and never quote the email
address: reports are printed and may be logged.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tidings.audience.subscribers import MAX_ATTRIBUTES_BYTES, validate_labels, validate_tier
from tidings.domain import tracking_consent
from tidings.domain.audience import Address, normalise_email, validate_name
from tidings.domain.consent import SubscriptionState
from tidings.domain.errors import InvalidInput

COLUMNS = (
    "email",
    "name",
    "tier",
    "labels",
    "newsletter",
    "status",
    "created_at",
    "tracking_consent",  # the person agreed to per-person open and click tracking (ENG-1)
)
FIELDS = (*COLUMNS, "first_name", "last_name")  # the two halves of `name`
LABEL_SEPARATORS = (";", "|")
DELIMITERS = (",", ";", "\t")
# Column names other tools export, normalised (`_header_key`), and the field each one is.
# Mailchimp: "Email Address", "First Name", "Last Name", "TAGS", "OPTIN_TIME"; Substack:
# "email", "name", "created_at"; Ghost: "email", "name", "labels", "created_at"; listmonk:
# "email", "name", "status", "created_at". Their other columns are ignored and reported.
HEADER_ALIASES = {
    **{column: column for column in COLUMNS},
    **dict.fromkeys(("e mail", "email address", "e mail address", "mail"), "email"),
    **dict.fromkeys(("full name", "display name"), "name"),
    **dict.fromkeys(("first name", "firstname", "fname", "given name"), "first_name"),
    **dict.fromkeys(("last name", "lastname", "lname", "surname", "family name"), "last_name"),
    **dict.fromkeys(("tags", "label"), "labels"),
    **dict.fromkeys(("created at", "optin time", "subscribed at", "signup date"), "created_at"),
    **dict.fromkeys(("tracking consent", "tracking"), "tracking_consent"),
}
_STATUSES = {state.value: state for state in SubscriptionState}
# Another tool's "subscribed" is not consent this site may assert: such rows wait for the
# person's confirmation (`confirmed` asserts it). Ended or blocked rows import unsubscribed.
_STATUSES.update(
    dict.fromkeys(("subscribed", "active", "enabled"), SubscriptionState.PENDING)
    | dict.fromkeys(
        ("blocklisted", "blacklisted", "disabled", "cleaned"), SubscriptionState.UNSUBSCRIBED
    )
)
# listmonk's custom fields: one JSON object per row.
ATTRIBUTES_COLUMN = "attributes"
# Other tools' bookkeeping, normalised: not the person's data, so not custom fields. Mailchimp
# (ratings, opt-in and confirm records, geolocation, its own ids, unsubscribe/clean records),
# listmonk and Ghost (ids, update times), Substack (billing state).
BOOKKEEPING_COLUMNS = frozenset(
    {
        "member rating", "optin ip", "confirm time", "confirm ip", "latitude", "longitude",
        "gmtoff", "dstoff", "timezone", "cc", "region", "last changed", "leid", "euid",
        "notes", "unsub time", "unsub campaign title", "unsub campaign id", "unsub reason",
        "unsub reason other", "clean time", "clean campaign title", "clean campaign id",
        "uuid", "id", "updated at", "deleted at", "lists", "note", "subscribed to emails",
        "complimentary plan", "stripe customer id", "tiers",
        "email disabled", "active subscription", "subscription type",
    }
)  # fmt: skip
_ATTRIBUTE_KEY = re.compile(r"[^a-z0-9_-]+")
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
    attributes: Mapping[str, Any] = field(default_factory=dict)  # the fields the row gives
    tracking_consent: bool | None = None  # asserted (True), denied (False), not said (None)

    @property
    def unsubscribes(self) -> bool:
        return self.status is SubscriptionState.UNSUBSCRIBED


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
    json_attributes: int | None = None  # listmonk's `attributes` column


def _header_key(name: str) -> str:
    # "Email Address", "email_address" and "E-mail  address" are one column name.
    return " ".join(re.split(r"[\s_-]+", name.strip().lower())).strip()


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
        mapping[_header_key(restore_formula(column))] = target
    return mapping


def read_header(fields: list[str], column_map: Mapping[str, str] | None = None) -> Header:
    """The file's first record as a header. A one-column file whose first cell is an
    address has no header: every line is an address. Columns no field takes are ignored;
    two columns for one field, or no `email`, fail the whole import before any row is read."""
    column_map = column_map or {}
    # A byte-order mark (Excel's "CSV UTF-8") is not part of the first column's name.
    names = [restore_formula(name.lstrip("\ufeff").strip()) for name in fields]
    keys = [_header_key(name) for name in names]
    unknown_maps = sorted(set(column_map) - set(keys))
    if unknown_maps:
        raise InvalidInput(
            f"--map names column(s) the file does not have: {', '.join(unknown_maps)}",
            field="map",
        )
    if len(names) == 1 and keys[0] not in column_map and "@" in names[0]:
        return Header({"email": 0}, width=1, has_header_row=False)
    columns: dict[str, int] = {}
    ignored: list[str] = []
    attributes: dict[str, int] = {}
    attribute_columns: list[str] = []
    json_attributes = None
    for position, (name, key) in enumerate(zip(names, keys, strict=True)):
        target = column_map[key] if key in column_map else HEADER_ALIASES.get(key, "")
        if key in column_map and not target:
            ignored.append(name)
            continue
        if not target:
            attribute = _attribute_key(key)
            if key == ATTRIBUTES_COLUMN and json_attributes is None:
                json_attributes = position
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
        json_attributes=json_attributes,
    )


def _attribute_key(header_key: str) -> str:
    """A column's name as a custom-field key usable in `{{ attribs.KEY }}` and `attr:KEY=…`:
    "Phone Number" is `phone_number`."""
    return _ATTRIBUTE_KEY.sub("_", header_key).strip("_")[:64]


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


class RowReader:
    """Validates rows one at a time and remembers what it needs to spot repeats: an address
    may appear once per newsletter, and its rows must not contradict each other."""

    def __init__(
        self,
        header: Header,
        *,
        newsletter_ids: Mapping[str, int],
        default_newsletter: str,
        now: datetime,
        assert_consent: bool = False,
    ) -> None:
        self._columns = header.columns
        self._attributes = header.attributes
        self._json_attributes = header.json_attributes
        self._width = header.width
        self._newsletter_ids = newsletter_ids
        self._default_newsletter = default_newsletter
        self._now = now
        # Rows that would wait for the person import confirmed: the admin asserts consent.
        self._waiting_becomes = (
            SubscriptionState.CONFIRMED if assert_consent else SubscriptionState.PENDING
        )
        self._line_of: dict[tuple[str, int], int] = {}
        # address key -> (first line, name given so far, tier given so far)
        self._subscriber_fields: dict[str, tuple[int, str | None, str | None]] = {}
        self._tracking_of: dict[str, tuple[int, bool]] = {}  # key -> (first line, consent)

    def read(self, line: int, fields: list[str]) -> ImportRow | list[RowError]:
        errors: list[RowError] = []

        def problem(field: str, message: str) -> None:
            errors.append(RowError(line, field, message))

        if len(fields) > self._width:
            problem("row", f"has {len(fields)} values but the header has {self._width}")
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
        full_name = cell.get("name") or " ".join(
            part for part in (cell.get("first_name"), cell.get("last_name")) if part
        )
        try:
            name = validate_name(full_name or None)
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
            problem(
                "status",
                "status must be pending, confirmed or unsubscribed (or another tool's "
                "subscribed, active, enabled, blocklisted, disabled or cleaned)",
            )
        try:
            created_at = self._created_at(cell.get("created_at", ""))
        except ValueError as exc:
            problem("created_at", str(exc))
        attributes: dict[str, Any] = {}
        try:
            attributes = self._attributes_of(fields)
        except InvalidInput as exc:
            problem("attributes", exc.detail)
        tracking = None
        try:
            tracking = tracking_consent.parse_flag(cell.get(tracking_consent.FIELD, ""))
        except InvalidInput as exc:
            problem(tracking_consent.FIELD, exc.detail)
        if status is SubscriptionState.PENDING:
            status = self._waiting_becomes
        if errors:
            return errors
        assert address is not None
        assert newsletter_id is not None
        assert status is not None
        repeat = self._repeat(line, address.key, newsletter_id, name, tier) or self._contradicts(
            line, address.key, tracking
        )
        if repeat is not None:
            return [repeat]
        return ImportRow(
            line,
            address,
            name,
            tier,
            labels,
            newsletter_id,
            status,
            created_at,
            attributes,
            tracking_consent=tracking,
        )

    def _contradicts(self, line: int, key: str, tracking: bool | None) -> RowError | None:
        """A row saying the opposite of an earlier row of the same address about tracking
        consent: which one the person meant cannot be guessed."""
        if tracking is None:
            return None
        first_line, said = self._tracking_of.setdefault(key, (line, tracking))
        if said != tracking:
            return RowError(
                line, tracking_consent.FIELD, f"differs from line {first_line} for the same address"
            )
        return None

    def _attributes_of(self, fields: list[str]) -> dict[str, Any]:
        """The row's custom fields: listmonk's JSON object, then the extra columns (a blank
        cell gives nothing, as blanks never clear)."""
        found: dict[str, Any] = {}
        if self._json_attributes is not None and self._json_attributes < len(fields):
            text = restore_formula(fields[self._json_attributes].strip())
            if text:
                try:
                    parsed = json.loads(text)
                except ValueError:
                    parsed = None
                if not isinstance(parsed, dict):
                    raise InvalidInput("attributes must be a JSON object", field="attributes")
                found.update(parsed)
        for key, position in self._attributes.items():
            if position < len(fields):
                cell = fields[position].strip()
                if cell:
                    found[key] = restore_formula(cell) if cell.startswith("'") else cell
        if found and len(json.dumps(found)) > MAX_ATTRIBUTES_BYTES:
            raise InvalidInput(
                f"custom fields must be under {MAX_ATTRIBUTES_BYTES} bytes of JSON",
                field="attributes",
            )
        return found

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
