"""Wall-clock times read in a time zone (issue 38 item 3): a time the zone skips is refused
with the reason, one it has twice is its first occurrence, and that is said."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.errors import InvalidInput
from tidings.domain.local_time import read_local, zone_named


def _wall(text: str) -> datetime:
    """A wall-clock time: a date and a time with no zone, as typed into the form."""
    return datetime.fromisoformat(text)


def test_a_time_in_the_spring_gap_is_refused_naming_the_field_and_the_reason() -> None:
    """02:30 on 2027-03-28 never happens in Paris; moving it silently to 03:30 would send an
    hour off what the operator typed."""
    with pytest.raises(InvalidInput) as refused:
        read_local(_wall("2027-03-28T02:30"), "Europe/Paris", field="scheduled_at")
    assert refused.value.field == "scheduled_at"
    assert "2027-03-28 02:30 does not exist in Europe/Paris" in refused.value.detail
    assert "daylight saving" in refused.value.detail


def test_a_time_in_the_autumn_fold_is_its_first_occurrence_and_says_so() -> None:
    """02:30 on 2027-10-31 happens twice in Paris: the earlier one (summer time, 00:30 UTC)
    is taken, and the note names both so the operator can give UTC instead."""
    read = read_local(_wall("2027-10-31T02:30"), "Europe/Paris", field="scheduled_at")
    assert read.ambiguous
    assert read.at.astimezone(UTC) == datetime(2027, 10, 31, 0, 30, tzinfo=UTC)
    note = read.note("Europe/Paris")
    assert note is not None
    assert "happens twice" in note
    assert "00:30 UTC, not 01:30 UTC" in note


def test_an_ordinary_time_is_read_in_its_zone_without_a_note() -> None:
    """The usual case stays plain: 09:00 in Paris in June is 07:00 UTC."""
    read = read_local(_wall("2027-06-01T09:00"), "Europe/Paris", field="scheduled_at")
    assert (read.ambiguous, read.note("Europe/Paris")) == (False, None)
    assert read.at.astimezone(UTC) == datetime(2027, 6, 1, 7, 0, tzinfo=UTC)


def test_an_unknown_zone_is_refused_naming_its_field() -> None:
    """A typo in a zone name is the operator's to fix, named as such."""
    for name in ("Mars/Olympus", "Europe", "../etc/passwd", ""):
        with pytest.raises(InvalidInput) as refused:
            zone_named(name, field="timezone")
        assert refused.value.field == "timezone"


@given(
    moment=st.datetimes(
        min_value=_wall("2000-01-01T00:00"),
        max_value=_wall("2060-01-01T00:00"),
        timezones=st.just(UTC),
    ),
    zone=st.sampled_from(["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "UTC"]),
)
def test_every_wall_time_that_exists_reads_back_to_an_instant_showing_it(
    moment: datetime, zone: str
) -> None:
    """Whatever the zone's rules (Lord Howe shifts by half an hour), a wall time that exists
    is accepted and names an instant whose local clock shows exactly that time."""
    wall = moment.astimezone(zone_named(zone, field="zone")).replace(tzinfo=None)
    read = read_local(wall, zone, field="scheduled_at")
    assert read.at.astimezone(zone_named(zone, field="zone")).replace(tzinfo=None) == wall
    assert read.at <= moment  # a fold's first occurrence is never later than the other
