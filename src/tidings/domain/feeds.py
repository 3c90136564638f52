"""Feed-to-email rules (AUT-2), pure: the schedule a feed is read on, the two modes, which
items are new, and how long to wait after a failed read.

A schedule is `DAYS HH:MM`: `mon 09:00`, `mon,thu 07:30`, `weekdays 08:00`, `daily 18:00`,
read in a time zone (IANA). A wall time that does not exist on a day (the spring-forward gap)
is taken as the same distance after the gap (02:30 becomes 03:30); one that happens twice
(the autumn fall-back) is its first occurrence.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from tidings.domain.errors import InvalidInput

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY_SETS = {"daily": tuple(range(7)), "weekdays": tuple(range(5)), "weekends": (5, 6)}
_SCHEDULE = re.compile(r"\s*(?P<days>[a-z,]+)\s+(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*")
EXAMPLE_SCHEDULES = '"mon 09:00", "mon,thu 07:30", "weekdays 08:00" or "daily 18:00"'
MAX_ITEM_KEY = 2000  # characters of a guid or link kept; a longer one is cut (and hashed whole)
MAX_DIGEST_ITEMS = 30  # items in one digest; more wait for the next one, oldest first


class FeedMode(StrEnum):
    DRAFT = "draft"  # the digest waits as a draft for someone to review and send
    SEND = "send"  # the digest is sent as soon as it is made


def parse_mode(value: str) -> FeedMode:
    """The mode named by `value`; InvalidInput naming the field otherwise."""
    try:
        return FeedMode(value.strip().lower())
    except ValueError:
        raise InvalidInput(f"mode must be 'draft' or 'send', not {value!r}", field="mode") from None


@dataclass(frozen=True, slots=True)
class FeedSchedule:
    """Days of the week (0 = Monday) and a wall-clock time, in some zone."""

    weekdays: tuple[int, ...]
    at: time

    @classmethod
    def parse(cls, text: str) -> FeedSchedule:
        """Read `mon 09:00`-style text; InvalidInput (field `every`) naming what is wrong."""
        match = _SCHEDULE.fullmatch(text.lower())
        if match is None:
            raise InvalidInput(
                f"every must be days and a time such as {EXAMPLE_SCHEDULES}, not {text!r}",
                field="every",
            )
        hour, minute = int(match["hour"]), int(match["minute"])
        if hour > 23 or minute > 59:
            raise InvalidInput(
                f"every: {match['hour']}:{match['minute']} is not a time of day (00:00-23:59)",
                field="every",
            )
        days: set[int] = set()
        for name in match["days"].split(","):
            if name in _DAY_SETS:
                days.update(_DAY_SETS[name])
            elif name in WEEKDAYS:
                days.add(WEEKDAYS.index(name))
            else:
                raise InvalidInput(
                    f"every: {name!r} is not a day; use {', '.join(WEEKDAYS)}, "
                    f"{', '.join(_DAY_SETS)}",
                    field="every",
                )
        return cls(tuple(sorted(days)), time(hour, minute))

    def __str__(self) -> str:
        days = next(
            (name for name, members in _DAY_SETS.items() if members == self.weekdays),
            ",".join(WEEKDAYS[day] for day in self.weekdays),
        )
        return f"{days} {self.at:%H:%M}"

    def next_after(self, moment: datetime, zone: ZoneInfo) -> datetime:
        """The first scheduled time strictly after `moment` (aware), in UTC."""
        local_day = moment.astimezone(zone).date()
        for offset in range(8):
            day = local_day + timedelta(days=offset)
            if day.weekday() not in self.weekdays:
                continue
            candidate = _wall_time(day, self.at, zone)
            if candidate > moment:
                return candidate
        raise AssertionError("a week always holds one of the schedule's days")  # pragma: no cover


def _wall_time(day: date, at: time, zone: ZoneInfo) -> datetime:
    # fold=0: in a gap, the offset before it applies, which lands after the gap once in UTC;
    # in a repeated hour, the first occurrence.
    return datetime.combine(day, at, tzinfo=zone).astimezone(UTC)


def parse_zone(name: str) -> ZoneInfo:
    """The IANA zone called `name`; InvalidInput otherwise."""
    try:
        return ZoneInfo(name)
    except (ValueError, OSError, KeyError):
        raise InvalidInput(f"{name!r} is not an IANA time zone name", field="timezone") from None


def item_key(guid: str | None, link: str | None) -> str | None:
    """What identifies an item across reads: its guid (Atom id), else its link; None when it
    has neither (such an item cannot be told from its next edit, so it is never sent)."""
    for value in (guid, link):
        if value is not None and value.strip():
            return value.strip()
    return None


def key_hash(key: str) -> str:
    """The fixed-length form of an item key the unique index holds (keys can be long URLs)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def retry_delay(failures: int, *, base_seconds: float, cap_seconds: float) -> timedelta:
    """How long after its `failures`-th failure in a row a feed is read again: doubling from
    `base_seconds`, at most `cap_seconds`."""
    exponent = max(failures - 1, 0)
    seconds = cap_seconds if exponent >= 32 else min(base_seconds * 2**exponent, cap_seconds)
    return timedelta(seconds=seconds)
