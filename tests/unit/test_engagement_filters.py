"""Engagement terms of audience filters (ENG-7): `engaged:DAYS` and `unengaged:DAYS` parse,
validate with errors naming the field, and judge only people whose engagement is known."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.errors import InvalidInput
from tidings.domain.segments import TIERS, Engagement, parse_filter

NOW = datetime(2026, 6, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def test_engagement_terms_parse_and_read_back() -> None:
    """A stored filter with an engagement term reads back as the same filter."""
    for text in ("engaged:30", "!unengaged:90", "tier:paid+engaged:7,label:vip+unengaged:365"):
        parsed = parse_filter(text)
        assert str(parsed) == text
        assert parse_filter(str(parsed)) == parsed
    assert str(parse_filter("ENGAGED:030")) == "engaged:30"


@pytest.mark.parametrize(
    "text",
    ["engaged:0", "engaged:-3", "engaged:", "unengaged:1.5", "engaged:ninety", "engaged:400"],
)
def test_days_must_be_a_positive_whole_number_within_retention(text: str) -> None:
    """A window of zero days, a fraction or one longer than the hits are kept would promise an
    answer the data cannot give; the error names the field and the allowed range."""
    with pytest.raises(
        InvalidInput, match="DAYS must be a whole number of days from 1 to 395"
    ) as caught:
        parse_filter(text, field="filter", max_engagement_days=395)
    assert caught.value.field == "filter"


def test_engagement_terms_leave_the_tiers_reachable() -> None:
    """Engagement is unknown when choosing which tiers to render: every tier stays reachable."""
    assert parse_filter("engaged:30").tiers() == TIERS
    assert parse_filter("tier:paid+unengaged:30").tiers() == ("paid",)


@pytest.mark.parametrize(
    ("text", "hits", "sends", "expected"),
    [
        ("engaged:30", [NOW - 29 * DAY], [], True),
        ("engaged:30", [NOW - 30 * DAY], [], True),  # the window's edge is inside
        ("engaged:30", [NOW - 31 * DAY], [], False),
        ("unengaged:30", [], [NOW - 10 * DAY], True),
        ("unengaged:30", [NOW - 5 * DAY], [NOW - 10 * DAY], False),
        ("unengaged:30", [], [NOW - 40 * DAY], False),  # nothing tracked was sent: unknown
        ("unengaged:30", [], [], False),  # never tracked (no consent): unknown
        ("!unengaged:30", [], [], True),
        ("!engaged:30", [], [], True),
        ("tier:free+engaged:30", [NOW - DAY], [], True),
        ("tier:paid+engaged:30", [NOW - DAY], [], False),
    ],
)
def test_engagement_terms_judge_only_what_is_known(
    text: str, hits: list[datetime], sends: list[datetime], expected: bool
) -> None:
    """`unengaged` must never sweep in people we simply could not see (no consent, no tracked
    send in the window): they would be cleaned out for a lack of data, not of interest."""
    known = Engagement(now=NOW, human_hits=hits, tracked_sends=sends)
    assert parse_filter(text).matches("free", frozenset(), {}, known) is expected


def test_without_engagement_data_no_engagement_term_matches() -> None:
    """A caller that knows nothing of a person's engagement must not select them by it."""
    assert parse_filter("engaged:30").matches("free", frozenset()) is False
    assert parse_filter("unengaged:30").matches("free", frozenset()) is False


@given(
    days=st.integers(min_value=1, max_value=3650),
    negated=st.booleans(),
    kind=st.sampled_from(["engaged", "unengaged"]),
    rest=st.sampled_from(["", "+tier:paid", "+label:a", ",attr:city=Paris"]),
)
def test_engagement_filter_text_round_trips(days: int, negated: bool, kind: str, rest: str) -> None:
    """Any valid window, negated or combined, is stored and read back unchanged."""
    text = ("!" if negated else "") + f"{kind}:{days}" + rest
    parsed = parse_filter(text)
    assert parse_filter(str(parsed)) == parsed
    assert parsed.judges_engagement()
