"""The auto-pause rule (SND-24) alone: a rate is judged only after its minimum sample, trips
only strictly past its threshold, and a resume's baseline makes the old figures count no more."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.auto_pause import AutoPausePolicy, FeedbackTally, auto_pause_reason

DEFAULT = AutoPausePolicy()
counts = st.integers(min_value=0, max_value=10_000_000)


def test_a_bad_start_below_the_minimum_sample_does_not_pause() -> None:
    """Three bounces among the first ten messages are noise: pausing on them would stop every
    send of a small list for nothing."""
    assert (
        auto_pause_reason(FeedbackTally(sent=499, hard_bounced=400, complained=0), DEFAULT) is None
    )


def test_past_the_threshold_after_the_sample_pauses_with_the_figures() -> None:
    """The operator must see which rate tripped and by how much, without any address."""
    reason = auto_pause_reason(FeedbackTally(sent=500, hard_bounced=26, complained=0), DEFAULT)
    assert reason == "hard bounces 26 of 500 sent (5.20%), over the 5% threshold"
    complaints = auto_pause_reason(FeedbackTally(1000, 0, 2), DEFAULT)
    assert complaints == "complaints 2 of 1000 sent (0.20%), over the 0.10% threshold"


def test_exactly_at_the_threshold_does_not_pause() -> None:
    """The threshold is the most a send may reach; only passing it pauses."""
    assert auto_pause_reason(FeedbackTally(500, 25, 1), DEFAULT) is None


def test_a_zero_rate_turns_that_check_off() -> None:
    """An operator may switch a measure off (a provider whose complaints never arrive)."""
    policy = AutoPausePolicy(hard_bounce_rate=0, complaint_rate=0)
    assert not policy.enabled
    assert auto_pause_reason(FeedbackTally(10_000, 10_000, 10_000), policy) is None


def test_a_policy_out_of_range_is_refused() -> None:
    """A rate of 5 (meant as 5%) would never trip: refuse it rather than watch nothing."""
    with pytest.raises(ValueError, match="fraction from 0 to 1"):
        AutoPausePolicy(hard_bounce_rate=5)
    with pytest.raises(ValueError, match="at least 1 message"):
        AutoPausePolicy(complaint_sample=0)


@given(sent=counts, hard=counts, complained=counts)
def test_it_pauses_exactly_when_a_rate_passes_after_its_sample(
    sent: int, hard: int, complained: int
) -> None:
    """The rule, stated once: any figures, the answer is the definition's."""
    tally = FeedbackTally(sent, hard, complained)
    expected = (sent >= 500 and hard > 0.05 * sent) or (sent >= 1000 and complained > 0.001 * sent)
    assert (auto_pause_reason(tally, DEFAULT) is not None) == expected


@given(before=st.tuples(counts, counts, counts), after=st.tuples(counts, counts, counts))
def test_after_a_resume_only_what_happened_since_counts(
    before: tuple[int, int, int], after: tuple[int, int, int]
) -> None:
    """Resuming must not re-trip on the figures that caused the pause: the thresholds apply to
    the messages and bounces since the resume, never below zero."""
    baseline = FeedbackTally(*before)
    now = FeedbackTally(*(b + a for b, a in zip(before, after, strict=True)))
    assert now.since(baseline) == FeedbackTally(*after)
    assert now.since(now) == FeedbackTally(0, 0, 0)
    assert auto_pause_reason(now.since(now), DEFAULT) is None
