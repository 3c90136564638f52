"""Bursts ("every link of one message within a second") are decided from the hits' times, not
their arrival order (ENG-4): a property over shuffled hits."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.engagement.apply import burst_ids, tally
from tidings.storage.engagement_hits import IntakeRow

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
HIT = st.tuples(
    st.sampled_from(["m1", "m2", "m3"]),  # message
    st.integers(min_value=1, max_value=4),  # link
    st.integers(min_value=0, max_value=3000),  # milliseconds after T0
)


def _rows(hits: list[tuple[str, int, int]]) -> list[IntakeRow]:
    return [
        IntakeRow(
            id=index,
            received_at=T0 + timedelta(milliseconds=ms),
            campaign_id=1,
            segment="free",
            number=number,
            kind="click",
            message_key=key,
            recipient_id=None,
            verdict="human",
            reason="browser",
            client_family="browser",
        )
        for index, (key, number, ms) in enumerate(hits)
    ]


def _outcome(hits: list[tuple[str, int, int]]) -> tuple[object, object]:
    rows = _rows(hits)
    burst = burst_ids(rows, 1.0, lambda _campaign, _segment: 3)
    for row in rows:
        if row.id in burst:
            row.verdict = "machine"
    verdicts = Counter((r.message_key, r.number, r.received_at, r.verdict) for r in rows)
    firsts, counts = tally(rows)
    return verdicts, (firsts, dict(counts))


@settings(max_examples=200, deadline=None)
@given(st.lists(HIT, max_size=14), st.randoms(use_true_random=False))
def test_bursts_and_counters_do_not_depend_on_arrival_order(
    hits: list[tuple[str, int, int]], shuffler: object
) -> None:
    """Proxies and scanners deliver hits in any order; if the verdict depended on it, the
    same campaign could report different numbers on a second look."""
    shuffled = list(hits)
    shuffler.shuffle(shuffled)  # type: ignore[attr-defined]
    assert _outcome(shuffled) == _outcome(hits)


def test_three_links_within_a_second_are_a_burst_and_a_person_reading_is_not() -> None:
    """The rule itself: a checker's three links in 0.6 s are a burst; a person's three links
    over a minute are not."""
    checker = _rows([("m1", 1, 0), ("m1", 2, 300), ("m1", 3, 600)])
    person = _rows([("m2", 1, 0), ("m2", 2, 20_000), ("m2", 3, 60_000)])
    assert burst_ids(checker, 1.0, lambda _c, _s: 3) == {0, 1, 2}
    assert burst_ids(person, 1.0, lambda _c, _s: 3) == set()
