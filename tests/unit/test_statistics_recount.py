"""When the workers count a large campaign's statistics again (SND-27): often while it is
sending or recent, never more than 1% of the database's time, once a day when settled."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tidings.campaigns.statistics import recount_due
from tidings.storage.sending.outcome_counts import Recount

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
EVERY = timedelta(seconds=15)


def _recount(
    counted_ago: timedelta | None, took_ms: int = 10, finished_ago: timedelta | None = None
) -> Recount:
    return Recount(
        campaign_id=1,
        counted_at=None if counted_ago is None else NOW - counted_ago,
        took_ms=took_ms,
        finished_at=None if finished_ago is None else NOW - finished_ago,
    )


def test_a_campaign_never_counted_is_counted() -> None:
    """The first count of a large campaign is not put off."""
    assert recount_due(_recount(None, finished_ago=timedelta(days=400)), NOW, EVERY)


def test_a_sending_campaign_is_counted_again_after_the_interval() -> None:
    """While it sends, its page lags the truth by about the interval, no more."""
    assert not recount_due(_recount(timedelta(seconds=14)), NOW, EVERY)
    assert recount_due(_recount(timedelta(seconds=15)), NOW, EVERY)


def test_a_slow_count_waits_a_hundred_times_its_time() -> None:
    """A ten-million-row count (4 s) is not run every 15 s: at most 1% of the database's time."""
    slow = 4000
    assert not recount_due(_recount(timedelta(seconds=399), took_ms=slow), NOW, EVERY)
    assert recount_due(_recount(timedelta(seconds=400), took_ms=slow), NOW, EVERY)


def test_a_settled_campaign_is_counted_once_a_day() -> None:
    """A campaign finished weeks ago only hears the odd late complaint: a daily count does."""
    settled = timedelta(days=15)
    assert not recount_due(_recount(timedelta(hours=23), finished_ago=settled), NOW, EVERY)
    assert recount_due(_recount(timedelta(days=1), finished_ago=settled), NOW, EVERY)
    recent = timedelta(days=2)
    assert recount_due(_recount(timedelta(seconds=20), finished_ago=recent), NOW, EVERY)
