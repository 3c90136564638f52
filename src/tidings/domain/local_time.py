"""A wall-clock time read in a time zone, with daylight saving's two traps made explicit.

A time in a DST gap (2027-03-28 02:30 in Europe/Paris: clocks jump from 02:00 to 03:00) never
happens there: it is refused with the reason, never moved silently to 03:30. A time in a DST
fold (2027-10-31 02:30 in Europe/Paris happens twice, at 00:30 and at 01:30 UTC) is read as its
first occurrence, the earlier instant (still summer time, Python's `fold=0`), and said so, so a
schedule never slips an hour later than the operator meant. Pure: no clock, no settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tidings.domain.errors import InvalidInput


@dataclass(frozen=True, slots=True)
class LocalTime:
    """An aware time read from a wall clock, and whether that wall time happens twice there."""

    at: datetime
    ambiguous: bool  # a DST fold: `at` is the first of its two occurrences

    def note(self, zone: str) -> str | None:
        """What an operator should be told about how the time was read, if anything."""
        if not self.ambiguous:
            return None
        later = self.at.replace(fold=1).astimezone(UTC)
        return (
            f"{self.at:%Y-%m-%d %H:%M} happens twice in {zone} (clocks go back): read as the "
            f"first, {self.at.astimezone(UTC):%H:%M} UTC, not {later:%H:%M} UTC"
        )


def zone_named(name: str, *, field: str) -> ZoneInfo:
    """The IANA zone `name`, or InvalidInput naming `field`."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: "Europe", a directory
        raise InvalidInput(
            f"{field}: {name!r} is not an IANA time zone such as Europe/Paris or UTC", field=field
        ) from None


def read_local(wall: datetime, zone_name: str, *, field: str) -> LocalTime:
    """`wall` (naive: a date and a time on a clock in `zone_name`) as an aware time. A time
    that does not exist there is refused naming `field`; one that happens twice is its first
    occurrence (see the module's note)."""
    zone = zone_named(zone_name, field=field)
    first = wall.replace(tzinfo=zone, fold=0)
    second = wall.replace(tzinfo=zone, fold=1)
    # A wall time that survives the round trip through UTC exists; one in a gap comes back
    # moved by the jump.
    if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != wall:
        raise InvalidInput(
            f"{field}: {wall:%Y-%m-%d %H:%M} does not exist in {zone_name}: the clocks "
            f"jump over it when daylight saving time starts; choose a time outside the gap "
            f"(or give it in UTC)",
            field=field,
        )
    return LocalTime(first, ambiguous=first.utcoffset() != second.utcoffset())
