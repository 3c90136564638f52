"""A campaign's opens and clicks on its page (ENG-5): the counters' hourly figures laid out as
charts, every hour between the first and the last shown (a quiet hour is a zero, not a gap),
by day once the span is too long for hours to be read."""

from __future__ import annotations

from datetime import datetime, timedelta

from tidings.engagement.results import CampaignEngagement, HourPeople
from tidings.ui.chart import LineChart, line_chart

HOURLY_UP_TO = timedelta(hours=72)


def _buckets(over_time: list[HourPeople]) -> tuple[list[str], list[int], list[int]]:
    """Labels and people's first opens and clicks per bucket, oldest first."""
    first, last = over_time[0].hour, over_time[-1].hour
    by_day = last - first > HOURLY_UP_TO
    step = timedelta(days=1) if by_day else timedelta(hours=1)

    def start(at: datetime) -> datetime:
        hour = at.replace(minute=0, second=0, microsecond=0)
        return hour.replace(hour=0) if by_day else hour

    origin = start(first)
    count = int((start(last) - origin) / step) + 1
    opens, clicks = [0] * count, [0] * count
    for point in over_time:
        index = int((start(point.hour) - origin) / step)
        opens[index] += point.opens
        clicks[index] += point.clicks
    label = "%m-%d" if by_day else "%m-%d %H:00"
    return [f"{origin + step * n:{label}}" for n in range(count)], opens, clicks


def engagement_charts(engagement: CampaignEngagement) -> list[tuple[str, LineChart]]:
    """People opening and people clicking over time; none when nothing was counted."""
    if not engagement.over_time:
        return []
    labels, opens, clicks = _buckets(engagement.over_time)
    unit = "hours" if ":" in labels[0] else "days"
    per = unit.removesuffix("s")
    return [
        (f"People opening per {per}", line_chart(labels, opens, what="first opens", unit=unit)),
        (f"People clicking per {per}", line_chart(labels, clicks, what="first clicks", unit=unit)),
    ]
