"""Reading each row of an import CSV (AUD-9): validation, other tools' statuses and labels
read into ours, per-row errors and warnings.

A row fails (an error, the row not imported) only when what decides *who* is written to, or
*whether they may be mailed*, cannot be read: the address, the newsletter, the status, the
tracking consent, or a repeat that contradicts an earlier row. Any other value that cannot
be used — a name, a tier, a label, a date, custom fields — is skipped with a warning naming
the line, the column and the value, and the rest of the row imports. Labels are normalised
to tidings' rule ("Press Contact" is `press-contact`) and the report lists each change.

Errors and warnings quote the cell: the report is for the operator who holds the file (the
CLI's output, the API's answer, the admin page) and is never logged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from tidings.audience.import_header import Header, RowError, restore_formula
from tidings.audience.import_vocabulary import (
    STATUS_WORDS,
    STATUSES,
    StatusMeaning,
    normalise_label,
    split_labels,
    status_from_derived,
    tier_from_derived,
)
from tidings.audience.subscribers import MAX_ATTRIBUTES_BYTES, MAX_LABELS, validate_tier
from tidings.domain import tracking_consent
from tidings.domain.audience import Address, normalise_email, validate_name
from tidings.domain.consent import SubscriptionState
from tidings.domain.errors import InvalidInput

MAX_VALUE_QUOTED = 200  # characters of a cell quoted in an error or warning


class Problem(Protocol):
    """Reports an error or a warning of this row: the field, why, and the value in question
    (the field's cell unless given)."""

    def __call__(self, field_name: str, message: str, value: str | None = None) -> None: ...


@dataclass(frozen=True, slots=True)
class ImportRow:
    """A valid row. `None` (and an empty `labels`) means the file left the field blank.
    `suppress` (a suppression reason) says the source found the address undeliverable,
    complaining or blocked: the address is suppressed and no subscriber is written."""

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
    suppress: str | None = None

    @property
    def unsubscribes(self) -> bool:
        return self.status is SubscriptionState.UNSUBSCRIBED


@dataclass(slots=True)
class RowResult:
    """What reading one row gave: the row to write (None when it failed or is skipped),
    its errors (it failed) or warnings (values skipped), the labels it renamed, and why it
    is skipped, if it is."""

    row: ImportRow | None = None
    errors: list[RowError] = field(default_factory=list)
    warnings: list[RowError] = field(default_factory=list)
    renamed_labels: list[tuple[str, str]] = field(default_factory=list)
    skipped: bool = False


def _quoted(value: str) -> str:
    return value if len(value) <= MAX_VALUE_QUOTED else value[: MAX_VALUE_QUOTED - 1] + "…"


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
        self._header = header
        self._columns = header.columns
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

    def read(self, line: int, fields: list[str]) -> RowResult:
        result = RowResult()
        cell = self._cells(fields)

        def problem(
            into: list[RowError], field_name: str, message: str, value: str | None = None
        ) -> None:
            value = cell.get(field_name) if value is None else value
            into.append(
                RowError(
                    line,
                    field_name,
                    message,
                    column=self._header.name_of(field_name),
                    value=None if value is None else _quoted(value),
                )
            )

        def fail(field_name: str, message: str, value: str | None = None) -> None:
            problem(result.errors, field_name, message, value)

        def warn(field_name: str, message: str, value: str | None = None) -> None:
            problem(result.warnings, field_name, message, value)

        if len(fields) > self._header.width:
            result.errors.append(
                RowError(line, "row", f"has {len(fields)} values but the header has "
                         f"{self._header.width}")
            )  # fmt: skip
            return result
        address = None
        try:
            if not cell.get("email"):
                raise InvalidInput("email is required", field="email")
            address = normalise_email(cell["email"])
        except InvalidInput as exc:
            fail("email", exc.detail)
        slug = cell.get("newsletter") or self._default_newsletter
        newsletter_id = self._newsletter_ids.get(slug)
        if newsletter_id is None:
            fail("newsletter", "no newsletter with that slug")
        meaning = self._status(cell, fail)
        tracking = None
        try:
            tracking = tracking_consent.parse_flag(cell.get(tracking_consent.FIELD, ""))
        except InvalidInput as exc:
            fail(tracking_consent.FIELD, exc.detail)
        if result.errors:
            return result
        assert address is not None
        assert newsletter_id is not None
        assert meaning is not None
        if meaning.skip is not None:
            warn("status", f"row skipped: {meaning.skip}")
            result.skipped = True
            return result
        name = tier = created_at = None
        labels: tuple[str, ...] = ()
        attributes: dict[str, Any] = {}
        if meaning.suppress is None:  # a suppressed address keeps nothing else: read no more
            name = self._name(cell, warn)
            tier = self._tier(cell, meaning, warn)
            labels = self._labels(cell, warn, result.renamed_labels)
            created_at = self._created_at(cell.get("created_at", ""), warn)
            attributes = self._attributes_of(fields, line, result.warnings)
        status = meaning.state or SubscriptionState.PENDING
        if status is SubscriptionState.PENDING:
            status = self._waiting_becomes
        repeat = self._repeat(line, address.key, newsletter_id, name, tier) or self._contradicts(
            line, address.key, tracking
        )
        if repeat is not None:
            value = cell.get(repeat.field)
            result.errors.append(
                RowError(
                    repeat.line,
                    repeat.field,
                    repeat.message,
                    column=self._header.name_of(repeat.field),
                    value=None if value is None else _quoted(value),
                )
            )
            result.warnings.clear()
            result.renamed_labels.clear()
            return result
        result.row = ImportRow(
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
            suppress=meaning.suppress,
        )
        return result

    def _status(self, cell: dict[str, str], fail: Problem) -> StatusMeaning | None:
        word = (cell.get("status") or status_from_derived(cell) or "pending").lower()
        meaning = STATUSES.get(word)
        if meaning is None:
            column = self._header.name_of("status")
            fail(
                "status",
                f"not a status this import knows ({STATUS_WORDS}); if the column "
                f"{column!r} is not a subscription status, ignore it with --map {column}=",
            )
        return meaning

    @staticmethod
    def _name(cell: dict[str, str], warn: Problem) -> str | None:
        full_name = cell.get("name") or " ".join(
            part for part in (cell.get("first_name"), cell.get("last_name")) if part
        )
        try:
            return validate_name(full_name or None)
        except InvalidInput as exc:
            field_name = "name" if cell.get("name") else "first_name"
            warn(field_name, f"{exc.detail}; the name was not imported")
            return None

    @staticmethod
    def _tier(cell: dict[str, str], meaning: StatusMeaning, warn: Problem) -> str | None:
        if cell.get("tier"):
            try:
                return validate_tier(cell["tier"].lower())
            except InvalidInput as exc:
                warn("tier", f"{exc.detail}; the tier was not imported")
                return None
        return meaning.tier or tier_from_derived(cell)

    @staticmethod
    def _labels(
        cell: dict[str, str], warn: Problem, renamed: list[tuple[str, str]]
    ) -> tuple[str, ...]:
        """The row's labels by tidings' rule; each one changed is noted, each unusable one
        (nothing left of it, or past the 50th) warned about and skipped."""
        labels: dict[str, None] = {}
        for raw in split_labels(cell.get("labels", "")):
            label = normalise_label(raw)
            if not label:
                warn("labels", "no letters or digits to keep; the label was skipped", raw)
                continue
            if label != raw:
                renamed.append((raw, label))
            if label not in labels and len(labels) >= MAX_LABELS:
                warn("labels", f"more than {MAX_LABELS} labels; this and later ones skipped", raw)
                break
            labels[label] = None
        return tuple(labels)

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

    def _attributes_of(
        self, fields: list[str], line: int, warnings: list[RowError]
    ) -> dict[str, Any]:
        """The row's custom fields: the JSON columns' objects, then the extra columns (a
        blank cell gives nothing, as blanks never clear). A JSON cell that is not an object,
        or fields too big to keep, are skipped with a warning."""
        found: dict[str, Any] = {}
        names = self._header.names
        for position in self._header.json_attributes:
            text = restore_formula(fields[position].strip()) if position < len(fields) else ""
            if not text:
                continue
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                found.update(parsed)
            else:
                warnings.append(
                    RowError(
                        line,
                        "attributes",
                        "not a JSON object; these custom fields were not imported",
                        column=names[position] if position < len(names) else None,
                        value=_quoted(text),
                    )
                )
        for key, position in self._header.attributes.items():
            if position < len(fields):
                cell = fields[position].strip()
                if cell:
                    found[key] = restore_formula(cell) if cell.startswith("'") else cell
        if found and len(json.dumps(found)) > MAX_ATTRIBUTES_BYTES:
            warnings.append(
                RowError(
                    line,
                    "attributes",
                    f"custom fields must be under {MAX_ATTRIBUTES_BYTES} bytes of JSON; "
                    "none of this row's were imported",
                )
            )
            return {}
        return found

    def _cells(self, fields: list[str]) -> dict[str, str]:
        cells = {}
        for name, position in self._columns.items():
            if position < len(fields):
                cell = fields[position].strip()
                cells[name] = restore_formula(cell) if cell.startswith("'") else cell
        return cells

    def _created_at(self, text: str, warn: Problem) -> datetime | None:
        if not text:
            return None
        try:
            parsed = _parse_time(text)
        except ValueError:
            warn("created_at", "not an ISO-8601 date or date-time; the date was not imported")
            return None
        # A time without an offset is taken as UTC.
        parsed = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
        if parsed > self._now:
            warn("created_at", "in the future; the date was not imported")
            return None
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


def _parse_time(text: str) -> datetime:
    """ISO-8601, as every export writes it; a trailing `Z` and Mailchimp's space-separated
    `2020-01-02 10:00:00` included (`fromisoformat` takes both), and a ` UTC` suffix."""
    if text.upper().endswith(" UTC"):
        text = text[:-4] + "+00:00"
    return datetime.fromisoformat(text)
