"""A/B tests (ENG-8), the pure parts: the keyed assignment, the two-proportion z-test and the
decision rule, with figures that clear the confidence and figures that do not."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.ab_tests import (
    HASH_MODULUS,
    AbField,
    AbMetric,
    AbTest,
    VariantFigures,
    assignment_key,
    build_test,
    decide,
    parse_variant,
    parse_wait,
    segment_order,
    split_segment,
    two_proportion,
    variant_of,
    variant_segment,
)
from tidings.domain.errors import InvalidInput


def test_a_clear_difference_in_clicks_picks_the_variant_and_says_it_is_significant() -> None:
    """The point of the test: 2% against 6% clicks on 1,000 messages each is no fluke
    (z about 4.6), so B wins and the result says it cleared the bar."""
    figures = [VariantFigures(1, 1000, 300, 20), VariantFigures(2, 1000, 310, 60)]
    decision = decide(figures, AbMetric.CLICKS, 0.95)
    assert (decision.winner, decision.significant) == (2, True)
    b = decision.results[1]
    assert b.z is not None
    assert b.p is not None
    assert b.z == pytest.approx(4.6, abs=0.1)
    assert b.p < 0.001
    assert decision.results[0].z is None  # A is the baseline, not tested against itself


def test_a_small_difference_leaves_the_default_and_says_nothing_cleared() -> None:
    """Sending the rest a variant that only looked better by chance is worse than the
    operator's own choice: 2.0% against 2.6% on 500 each (p about 0.5) is not evidence."""
    figures = [VariantFigures(1, 500, 100, 10), VariantFigures(2, 500, 90, 13)]
    decision = decide(figures, AbMetric.CLICKS, 0.95)
    assert (decision.winner, decision.significant) == (1, False)
    assert decision.results[1].p is not None
    assert decision.results[1].p > 0.05


def test_the_metric_decides_which_count_is_compared() -> None:
    """Opens and clicks can disagree: with `opens` the open counts decide, not the clicks."""
    figures = [VariantFigures(1, 1000, 400, 60), VariantFigures(2, 1000, 200, 20)]
    assert decide(figures, AbMetric.OPENS, 0.95).winner == 1
    figures = [VariantFigures(1, 1000, 200, 60), VariantFigures(2, 1000, 400, 20)]
    opens = decide(figures, AbMetric.OPENS, 0.95)
    assert (opens.winner, opens.significant) == (2, True)
    assert decide(figures, AbMetric.CLICKS, 0.95).winner == 1


def test_a_variant_worse_than_the_default_never_wins_however_significant() -> None:
    """Significance alone is not a win: B clearly worse than A leaves A."""
    figures = [VariantFigures(1, 1000, 0, 80), VariantFigures(2, 1000, 0, 10)]
    decision = decide(figures, AbMetric.CLICKS, 0.95)
    assert (decision.winner, decision.significant) == (1, False)
    assert decision.results[1].z is not None
    assert decision.results[1].z < -5


def test_more_alternatives_need_stronger_evidence_each() -> None:
    """Bonferroni: with three alternatives each must reach p < 0.05/3, so a p of 0.03 that
    wins a two-variant test does not win a four-variant one."""
    a, b = VariantFigures(1, 2000, 0, 100), VariantFigures(2, 2000, 0, 130)
    z, p = two_proportion(100, 2000, 130, 2000)
    assert 0.0167 < p < 0.05
    assert z > 0
    assert decide([a, b], AbMetric.CLICKS, 0.95).winner == 2
    c, d = VariantFigures(3, 2000, 0, 100), VariantFigures(4, 2000, 0, 100)
    assert decide([a, b, c, d], AbMetric.CLICKS, 0.95).winner == 1


def test_of_several_that_clear_the_bar_the_best_rate_wins() -> None:
    """Two alternatives both beat A: the rest gets the better one."""
    figures = [
        VariantFigures(1, 1000, 0, 20),
        VariantFigures(2, 1000, 0, 70),
        VariantFigures(3, 1000, 0, 90),
    ]
    assert decide(figures, AbMetric.CLICKS, 0.95).winner == 3


def test_no_messages_or_no_variance_is_never_significant() -> None:
    """A test share nobody received (a tiny audience) decides nothing: A goes to the rest."""
    assert two_proportion(0, 0, 0, 0) == (0.0, 1.0)
    assert two_proportion(0, 10, 0, 10) == (0.0, 1.0)
    figures = [VariantFigures(1, 0, 0, 0), VariantFigures(2, 0, 0, 0)]
    decision = decide(figures, AbMetric.CLICKS, 0.95)
    assert (decision.winner, decision.significant) == (1, False)


def test_a_higher_confidence_can_turn_a_win_into_the_default() -> None:
    """`ab.confidence` is the bar: p about 0.01 clears 0.95 but not 0.999."""
    figures = [VariantFigures(1, 1000, 0, 30), VariantFigures(2, 1000, 0, 52)]
    _z, p = two_proportion(30, 1000, 52, 1000)
    assert 0.001 < p < 0.05
    assert decide(figures, AbMetric.CLICKS, 0.95).winner == 2
    assert decide(figures, AbMetric.CLICKS, 0.999).winner == 1


@given(
    trials_a=st.integers(1, 10_000),
    trials_b=st.integers(1, 10_000),
    data=st.data(),
)
def test_the_z_test_is_antisymmetric_and_its_p_a_probability(
    trials_a: int, trials_b: int, data: st.DataObject
) -> None:
    """Swapping the two variants flips z and keeps p: the test has no favourite side."""
    a = data.draw(st.integers(0, trials_a))
    b = data.draw(st.integers(0, trials_b))
    z, p = two_proportion(a, trials_a, b, trials_b)
    z_swapped, p_swapped = two_proportion(b, trials_b, a, trials_a)
    assert z == pytest.approx(-z_swapped, abs=1e-9)
    assert p == pytest.approx(p_swapped, abs=1e-12)
    assert 0.0 <= p <= 1.0


@given(campaign=st.integers(1, 10**9), subscriber=st.integers(1, 2**62))
def test_assignment_is_a_function_of_campaign_and_subscriber_only(
    campaign: int, subscriber: int
) -> None:
    """A retry or a restart recomputes the same variant: nothing but the secret, the campaign
    and the subscriber goes in."""
    first = assignment_key("secret", campaign).bucket(subscriber)
    again = assignment_key("secret", campaign).bucket(subscriber)
    assert first == again
    assert 0 <= first < HASH_MODULUS


def test_assignment_splits_the_audience_by_the_share_and_evenly_between_variants() -> None:
    """20% in the test, split about evenly in three: a fair test needs comparable groups."""
    key = assignment_key("secret", 7)
    counted = Counter(variant_of(key.bucket(n), 20, 3) for n in range(1, 30_001))
    assert counted[None] == pytest.approx(24_000, rel=0.02)
    for variant in (1, 2, 3):
        assert counted[variant] == pytest.approx(2_000, rel=0.06)


@pytest.mark.parametrize(
    "ids",
    [range(1, 240, 2), range(2, 361, 3), range(10**12, 10**12 + 600, 10), range(7, 6007, 100)],
    ids=["every-other-id", "every-third-id", "large-ids-step-10", "sparse"],
)
def test_patterned_ids_split_like_independent_draws(ids: range) -> None:
    """Tiers interleave ids (free, paid, free…): a linear hash can send a whole tier's test
    share to one variant; the keyed polynomial must not, for any of hundreds of campaigns."""
    worst = 1.0
    for campaign in range(1, 401):
        key = assignment_key("secret", campaign)
        counted = Counter(variant_of(key.bucket(n), 50, 2) for n in ids)
        tested = counted[1] + counted[2]
        worst = min(worst, min(counted[1], counted[2]) / tested)
    # Binomial draws of ~30 fall below 10% about once in 100,000 tries; a linear hash hit 0%.
    assert worst > 0.1, f"a variant got only {worst:.0%} of a test share"


def test_assignment_differs_between_campaigns_and_secrets() -> None:
    """The same people are not always the guinea pigs: another campaign (or site) draws a
    different test group."""

    def group(secret: str, campaign: int) -> set[int]:
        key = assignment_key(secret, campaign)
        return {n for n in range(1, 5001) if variant_of(key.bucket(n), 20, 2) is not None}

    first = group("secret", 1)
    assert len(first & group("secret", 2)) < 0.4 * len(first)
    assert len(first & group("other", 1)) < 0.4 * len(first)


def test_segments_name_the_variant_and_keep_the_tier() -> None:
    """Batches carry `<tier>-v<n>`; the remainder keeps the tier, which is how every
    per-segment count becomes a per-variant one."""
    assert variant_segment("paid", 2) == "paid-v2"
    assert split_segment("paid-v2") == ("paid", 2)
    assert split_segment("free") == ("free", None)
    assert segment_order(("free", "paid"), 2) == (
        "free-v1",
        "free-v2",
        "free",
        "paid-v1",
        "paid-v2",
        "paid",
    )


def test_a_test_is_checked_when_it_is_asked_for() -> None:
    """Errors name the field, at save time, never at send time."""
    test = build_test({"subject": ["B"]}, test_share=20, test_wait="4h", metric="clicks")
    assert test == AbTest(AbField.SUBJECT, ("B",), 20, timedelta(hours=4), AbMetric.CLICKS)
    assert build_test({"subject": []}, test_share=20, test_wait="4h", metric="clicks") is None
    cases = [
        ({"subject": ["B", "C", "D", "E"]}, 20, "4h", "clicks", "variants"),
        ({"subject": ["B"], "preheader": ["P"]}, 20, "4h", "clicks", "variants"),
        ({"subject": ["B"]}, 0, "4h", "clicks", "test_share"),
        ({"subject": ["B"]}, 95, "4h", "clicks", "test_share"),
        ({"subject": ["B"]}, 20, "soon", "clicks", "test_wait"),
        ({"subject": ["B"]}, 20, "30d", "clicks", "test_wait"),
        ({"subject": ["B"]}, 20, "4h", "replies", "test_metric"),
        ({"subject": [" "]}, 20, "4h", "clicks", "variants"),
    ]
    for variants, share, wait, metric, field in cases:
        with pytest.raises(InvalidInput) as raised:
            build_test(variants, test_share=share, test_wait=wait, metric=metric)
        assert raised.value.field == field, variants


def test_durations_and_variant_names_read_as_people_write_them() -> None:
    """`--test-wait 90m`, `pick-winner 7 b`: the forms in the docs all work."""
    assert parse_wait("90m") == timedelta(minutes=90)
    assert parse_wait("2") == timedelta(hours=2)
    assert parse_wait("1d") == timedelta(days=1)
    assert parse_wait("1.5s") == timedelta(seconds=1.5)
    assert parse_variant("b", 2) == 2
    assert parse_variant("1", 2) == 1
    for wrong in ("C", "3", "", "AB"):
        with pytest.raises(InvalidInput):
            parse_variant(wrong, 2)
