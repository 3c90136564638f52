"""The tracking-consent rules (ENG-1): what an import cell means, and what giving or
withdrawing consent writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tidings.domain.errors import InvalidInput
from tidings.domain.tracking_consent import ConsentSource, TrackingConsent, change, parse_flag

NOW = datetime(2026, 6, 1, tzinfo=UTC)
GIVEN = TrackingConsent(NOW - timedelta(days=30), "signup")


@pytest.mark.parametrize(
    ("cell", "meaning"),
    [
        ("true", True), ("TRUE", True), (" yes ", True), ("1", True),
        ("false", False), ("No", False), ("0", False),
        ("", None), ("   ", None),
    ],
)  # fmt: skip
def test_import_cells_read_as_yes_no_or_not_said(cell: str, meaning: bool | None) -> None:
    """Other tools spell yes and no many ways; a blank cell must assert nothing."""
    assert parse_flag(cell) is meaning


@pytest.mark.parametrize("cell", ["y", "maybe", "2", "ja", "true!", "on"])
def test_anything_else_is_refused_naming_the_field(cell: str) -> None:
    """A cell that is not plainly yes or no must never be read as consent."""
    with pytest.raises(InvalidInput) as refused:
        parse_flag(cell)
    assert refused.value.field == "tracking_consent"


def test_giving_records_when_and_how() -> None:
    """The record of consent is its time and the way it was given."""
    written = change(TrackingConsent(), True, source=ConsentSource.PREFERENCES, now=NOW)
    assert written == TrackingConsent(NOW, "preferences")


def test_giving_again_keeps_the_first_record() -> None:
    """Asking twice must not move when consent was first given."""
    assert change(GIVEN, True, source=ConsentSource.IMPORT, now=NOW) is None


def test_withdrawing_clears_both_columns_and_withdrawing_nothing_changes_nothing() -> None:
    """Withdrawn consent leaves no half record; no consent stays no consent."""
    assert change(GIVEN, False, source=ConsentSource.PREFERENCES, now=NOW) == TrackingConsent()
    assert change(TrackingConsent(), False, source=ConsentSource.API, now=NOW) is None
