"""Pure sending rules: pages never cross segments and cover every candidate once, warming
capacity is honoured in candidate order, verification errors pick the right event."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.config import ConfigurationError, load_settings
from tidings.domain.sending import (
    SegmentRange,
    VerificationFailed,
    check_count,
    check_message_counts,
    drift_is_notable,
    plan_pages,
)

segment_sizes = st.lists(st.integers(min_value=0, max_value=3000), min_size=1, max_size=3)


def _ranges(sizes: list[int]) -> list[SegmentRange]:
    ranges, first = [], 1
    for index, size in enumerate(sizes):
        if size:
            ranges.append(SegmentRange(f"s{index}", first, size))
        first += size
    return ranges


@given(sizes=segment_sizes, batch=st.integers(1, 1000), warm=st.integers(0, 5000))
def test_pages_cover_every_candidate_once_within_one_segment(
    sizes: list[int], batch: int, warm: int
) -> None:
    """A lost or doubled position would be a reader missed or mailed twice; a page across
    segments would give someone the wrong version."""
    ranges = _ranges(sizes)
    pages = plan_pages(
        ranges,
        batch_size=batch,
        fallback_domain="main.example",
        warming_domain="warm.example",
        warming_remaining=warm,
    )
    covered = [position for page in pages for position in range(page.first, page.last + 1)]
    assert covered == list(range(1, sum(sizes) + 1))
    for page in pages:
        assert 1 <= page.size <= batch
        owner = next(r for r in ranges if r.first <= page.first < r.first + r.count)
        assert page.last < owner.first + owner.count
        assert page.segment == owner.segment
    warmed = sum(page.size for page in pages if page.domain == "warm.example")
    assert warmed == min(warm, sum(sizes))
    # Warming takes the first candidates in order; the fallback takes the rest.
    domains = [page.domain for page in pages]
    assert domains == sorted(domains, key=lambda d: d != "warm.example")
    assert [page.page for page in pages] == list(range(1, len(pages) + 1))


def test_warming_pages_are_capped_and_fallback_pages_are_full_size() -> None:
    """SND-5: the warming domain gets what its day has left, the rest goes at full size."""
    pages = plan_pages(
        [SegmentRange("free", 1, 2500)],
        batch_size=1000,
        fallback_domain="main.example",
        warming_domain="warm.example",
        warming_remaining=1200,
    )
    assert [(p.size, p.domain) for p in pages] == [
        (1000, "warm.example"),
        (200, "warm.example"),
        (1000, "main.example"),
        (300, "main.example"),
    ]


def test_without_a_warming_domain_the_capacity_is_ignored() -> None:
    """A capacity with no domain configured must not invent one."""
    pages = plan_pages(
        [SegmentRange("paid", 1, 10)],
        batch_size=4,
        fallback_domain="m.example",
        warming_remaining=100,
    )
    assert {p.domain for p in pages} == {"m.example"}


@pytest.mark.parametrize(
    ("preflight", "consumed", "notable"),
    [
        (100, 100, False),
        (100, 99, True),
        (1000, 991, False),
        (1000, 990, True),
        (0, 0, False),
        (0, 1, True),
        (200, 202, True),
    ],
)
def test_audience_drift_warns_from_one_percent(
    preflight: int, consumed: int, notable: bool
) -> None:
    """SND-7: a difference of 1% or more is worth a warning; less is noise."""
    assert drift_is_notable(preflight, consumed) is notable


def test_unequal_known_counts_are_a_count_mismatch_event() -> None:
    """The mismatch event requires two known, valid, unequal counts (SND-16)."""
    with pytest.raises(VerificationFailed) as caught:
        check_count("batch_recipient_count", expected=1000, actual=997, batch_id=4)
    assert caught.value.event == "email.recipient_count.mismatch"
    assert caught.value.fields() == {
        "code": "recipient_verification_failed",
        "reason": "batch_recipient_count",
        "batch_id": 4,
        "expected": 1000,
        "actual": 997,
    }
    assert caught.value.retryable is False


def test_a_payload_that_lost_or_doubled_a_recipient_is_a_message_count_mismatch() -> None:
    """Before a payload goes out, everyone loaded is in it or excluded: a recipient lost or
    doubled on the way is the `message_recipient_counts` mismatch, with its counts (SND-16)."""
    check_message_counts(20, 18, 2, batch_id=7, recipient_count=20)  # adds up: no error
    with pytest.raises(VerificationFailed) as caught:
        check_message_counts(20, 17, 2, batch_id=7, recipient_count=20)
    assert caught.value.event == "email.recipient_count.mismatch"
    assert caught.value.fields() == {
        "code": "recipient_verification_failed",
        "reason": "message_recipient_counts",
        "batch_id": 7,
        "expected": 20,
        "actual": 19,
        "recipient_count": 20,
        "submission_excluded_count": 2,
    }


def test_an_unknown_count_is_a_verification_failure_not_a_mismatch() -> None:
    """An unknown count is not evidence of a discrepancy of a given size."""
    with pytest.raises(VerificationFailed) as caught:
        check_count("preparation_totals", expected=None, actual=5)
    assert caught.value.event == "email.verification.failed"
    check_count("preparation_totals", expected=5, actual=5)  # equal: no error


@pytest.mark.parametrize("value", ["0", "-1", "2.5", "two", "true", ""])
def test_batch_creation_concurrency_must_be_a_positive_integer(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """A bad concurrency stops boot with an error naming the key (SND-4, CFG-1)."""
    monkeypatch.setenv("TIDINGS_BULK_EMAIL_BATCH_CREATION_CONCURRENCY", value)
    with pytest.raises(ConfigurationError, match=r"bulk_email\.batch_creation_concurrency"):
        load_settings()


def test_batch_creation_concurrency_accepts_a_whole_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The documented form works, from the environment and as a TOML number."""
    monkeypatch.setenv("TIDINGS_BULK_EMAIL_BATCH_CREATION_CONCURRENCY", "4")
    assert load_settings().bulk_email.batch_creation_concurrency == 4
    monkeypatch.delenv("TIDINGS_BULK_EMAIL_BATCH_CREATION_CONCURRENCY")
    assert (
        load_settings(
            bulk_email={"batch_creation_concurrency": 3.0}
        ).bulk_email.batch_creation_concurrency
        == 3
    )
    assert load_settings().bulk_email.batch_creation_concurrency == 2
