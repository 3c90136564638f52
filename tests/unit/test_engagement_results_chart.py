"""The campaign page's opens and clicks charts (ENG-5): every hour between the first and the
last hit is a point, a quiet hour a zero; a long span is drawn by day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tidings.engagement.results import CampaignEngagement, HourPeople, Reach
from tidings.ui.engagement import engagement_charts

START = datetime(2026, 3, 2, 22, tzinfo=UTC)


def _engagement(*points: HourPeople) -> CampaignEngagement:
    return CampaignEngagement(1, "aggregate", measured=True, reach=Reach(10), over_time=[*points])


def test_quiet_hours_between_hits_are_zeros_not_gaps() -> None:
    """Leaving out a quiet hour would join its neighbours and draw activity that never was."""
    charts = engagement_charts(
        _engagement(HourPeople(START, 5, 1), HourPeople(START + timedelta(hours=3), 2, 0))
    )
    (open_label, opens), (click_label, clicks) = charts
    assert (open_label, click_label) == ("People opening per hour", "People clicking per hour")
    assert opens.summary == "7 first opens over 4 hours, at most 5 in one hour"
    assert clicks.summary == "1 first clicks over 4 hours, at most 1 in one hour"
    assert (opens.first_label, opens.last_label) == ("03-02 22:00", "03-03 01:00")


def test_a_long_span_is_drawn_by_day() -> None:
    """Hundreds of hourly points cannot be read; a week of hits is seven days."""
    charts = engagement_charts(
        _engagement(
            HourPeople(START, 5, 1),
            HourPeople(START + timedelta(hours=3), 2, 0),  # the next day, 01:00
            HourPeople(START + timedelta(days=6), 1, 1),
        )
    )
    (label, opens), _ = charts
    assert label == "People opening per day"
    assert opens.summary == "8 first opens over 7 days, at most 5 in one day"
    assert (opens.first_label, opens.last_label) == ("03-02", "03-08")


def test_nothing_counted_draws_no_chart() -> None:
    """An empty chart would look like a measured zero."""
    assert engagement_charts(_engagement()) == []
