"""Feed schedules, item identity and retry delays (AUT-2), and the digest's content: pure
rules, tested alone (HOUSE rule 9)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.errors import InvalidInput
from tidings.domain.feeds import (
    FeedMode,
    FeedSchedule,
    item_key,
    parse_mode,
    retry_delay,
)
from tidings.rendering import TemplateEngine, check_content
from tidings.rendering.feed_digest import DigestItem, digest_content

PARIS = ZoneInfo("Europe/Paris")


@pytest.mark.parametrize(
    ("text", "weekdays", "at", "shown"),
    [
        ("mon 09:00", (0,), time(9, 0), "mon 09:00"),
        ("Mon,Thu 7:30", (0, 3), time(7, 30), "mon,thu 07:30"),
        ("weekdays 08:00", (0, 1, 2, 3, 4), time(8, 0), "weekdays 08:00"),
        ("daily 18:00", tuple(range(7)), time(18, 0), "daily 18:00"),
        ("sat,sun 10:00", (5, 6), time(10, 0), "weekends 10:00"),
    ],
)
def test_schedules_parse_and_print_canonically(
    text: str, weekdays: tuple[int, ...], at: time, shown: str
) -> None:
    """What an operator types is read as meant and shown back in one spelling."""
    schedule = FeedSchedule.parse(text)
    assert (schedule.weekdays, schedule.at, str(schedule)) == (weekdays, at, shown)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "days and a time"),
        ("09:00", "days and a time"),
        ("every monday", "days and a time"),
        ("mon 24:00", "not a time of day"),
        ("mon 09:60", "not a time of day"),
        ("funday 09:00", "'funday' is not a day"),
    ],
)
def test_a_schedule_that_does_not_parse_is_refused_naming_the_field(
    text: str, message: str
) -> None:
    """A schedule is refused with what is wrong, under the field `every`."""
    with pytest.raises(InvalidInput, match=message) as refused:
        FeedSchedule.parse(text)
    assert refused.value.field == "every"


def test_the_next_run_is_read_in_the_zone() -> None:
    """Monday 09:00 in Paris is 07:00 UTC in summer and 08:00 UTC in winter."""
    schedule = FeedSchedule.parse("mon 09:00")
    summer = datetime(2026, 6, 1, 6, 0, tzinfo=UTC)  # a Monday, 08:00 in Paris
    assert schedule.next_after(summer, PARIS) == datetime(2026, 6, 1, 7, 0, tzinfo=UTC)
    assert schedule.next_after(datetime(2026, 6, 1, 7, 0, tzinfo=UTC), PARIS) == datetime(
        2026, 6, 8, 7, 0, tzinfo=UTC
    )
    winter = datetime(2026, 12, 1, tzinfo=UTC)
    assert schedule.next_after(winter, PARIS) == datetime(2026, 12, 7, 8, 0, tzinfo=UTC)


def test_a_time_in_the_spring_gap_runs_after_it_and_a_repeated_one_once() -> None:
    """02:30 does not exist in Paris on 29 March 2026: the run is at 03:30 local (01:30
    UTC). 02:30 happens twice on 25 October 2026: the run is the first one (00:30 UTC)."""
    schedule = FeedSchedule.parse("sun 02:30")
    spring = schedule.next_after(datetime(2026, 3, 28, tzinfo=UTC), PARIS)
    assert spring == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    assert spring.astimezone(PARIS).hour == 3
    autumn = schedule.next_after(datetime(2026, 10, 24, tzinfo=UTC), PARIS)
    assert autumn == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    after = schedule.next_after(autumn, PARIS)
    assert after == datetime(2026, 11, 1, 1, 30, tzinfo=UTC)  # not the second 02:30


@given(
    days=st.sets(st.integers(0, 6), min_size=1),
    hour=st.integers(0, 23),
    minute=st.integers(0, 59),
    moment=st.datetimes(
        # hypothesis takes naive bounds and attaches `timezones` itself
        min_value=datetime(2000, 1, 1),  # noqa: DTZ001
        max_value=datetime(2099, 1, 1),  # noqa: DTZ001
        timezones=st.just(UTC),
    ),
    zone=st.sampled_from(["UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe"]),
)
def test_the_next_run_is_soon_after_and_on_a_scheduled_day(
    days: set[int], hour: int, minute: int, moment: datetime, zone: str
) -> None:
    """Whatever the schedule, zone and moment: the next run is later, within eight days,
    and falls on one of the schedule's days in that zone."""
    schedule = FeedSchedule(tuple(sorted(days)), time(hour, minute))
    found = schedule.next_after(moment, ZoneInfo(zone))
    assert moment < found <= moment + timedelta(days=8)
    local = found.astimezone(ZoneInfo(zone))
    # In a gap the wall time moves on by the gap; the gaps are at night, so the day stays.
    assert local.weekday() in days


def test_modes() -> None:
    """draft and send, any case; anything else is refused under `mode`."""
    assert parse_mode(" SEND ") is FeedMode.SEND
    with pytest.raises(InvalidInput, match="mode must be 'draft' or 'send'") as refused:
        parse_mode("later")
    assert refused.value.field == "mode"


def test_an_item_is_its_guid_else_its_link() -> None:
    """The guid identifies an item; without one the link does; with neither, nothing."""
    assert item_key(" g1 ", "https://x/1") == "g1"
    assert item_key("", "https://x/1") == "https://x/1"
    assert item_key(None, "  ") is None


def test_retry_delays_double_up_to_the_cap() -> None:
    """15 minutes, 30, 60 … never more than the cap, whatever the count."""
    delays = [retry_delay(n, base_seconds=900, cap_seconds=21_600) for n in (1, 2, 3, 6, 100)]
    assert [delay.total_seconds() for delay in delays] == [900, 1800, 3600, 21_600, 21_600]


def test_digest_content_is_sanitised_and_cannot_carry_merge_tags_or_blocks() -> None:
    """A hostile feed cannot script the email, reach a reader's personal values through a
    merge tag, or open a segment block; a whole post is cut to a summary."""
    engine = TemplateEngine()
    content = digest_content(
        engine.environment,
        [
            DigestItem(
                "Hi {{ email }}\nthere",
                "https://blog.example/a",
                '<p onclick="x()">Text<script>alert(1)</script>\n::: only paid\n'
                "{{ unsubscribe_url }}</p>",
                "https://blog.example/a.png",
            ),
            DigestItem("<b>Bold</b> title", None, "word " * 400, None),
        ],
        fallback_title="Weekly",
    )
    assert content.subject == "Hi { { email }} there (and 1 more)"
    assert content.preheader == "Bold title"
    assert "{{" not in content.body
    assert "<script" not in content.body
    assert "onclick" not in content.body
    assert not any(line.lstrip().startswith(":::") for line in content.body.splitlines())
    assert '<img src="https://blog.example/a.png"' in content.body
    assert "…" in content.body
    assert check_content(content) == frozenset()  # no segment blocks came through


def test_an_untitled_item_takes_the_feed_title() -> None:
    """An item without a title still has a heading and the digest a subject."""
    engine = TemplateEngine()
    content = digest_content(
        engine.environment, [DigestItem("", "https://x/1", "", None)], fallback_title="The Blog"
    )
    assert content.subject == "The Blog"
