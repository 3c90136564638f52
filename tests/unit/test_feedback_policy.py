"""The bounce and complaint policy (AUD-13): what reported events do to an address, the same
whatever order they arrive in and however often."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import reduce

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.domain.feedback import (
    AddressRecord,
    BouncePolicy,
    EventKind,
    FeedbackEvent,
    stronger_reason,
    verdict,
)

T0 = datetime(2026, 11, 1, tzinfo=UTC)
POLICY = BouncePolicy(soft_bounce_limit=3, soft_bounce_window=timedelta(days=7))


def event(kind: EventKind, day: float, key: str | None = None) -> FeedbackEvent:
    return FeedbackEvent(kind, T0 + timedelta(days=day), key or f"{kind}-{day}")


def fold(events: list[FeedbackEvent]) -> AddressRecord:
    return reduce(AddressRecord.merged, events, AddressRecord())


def test_a_hard_bounce_suppresses_at_once() -> None:
    """A dead mailbox must not be mailed again: one hard bounce is enough."""
    assert verdict(fold([event(EventKind.HARD_BOUNCE, 0)]), POLICY).suppression == "hard_bounce"


def test_a_complaint_suppresses_and_unsubscribes_everywhere() -> None:
    """Someone who marked us as spam wants nothing more from any of our newsletters."""
    decided = verdict(
        fold([event(EventKind.HARD_BOUNCE, 0), event(EventKind.COMPLAINT, 1)]), POLICY
    )
    assert decided.suppression == "complaint"
    assert decided.unsubscribe_everywhere


def test_soft_bounces_suppress_only_when_enough_fall_within_the_window() -> None:
    """A full mailbox now and then is no reason to drop a reader; a run of them is."""
    spread = fold([event(EventKind.SOFT_BOUNCE, day) for day in (0, 5, 10, 15)])
    assert not verdict(spread, POLICY).suppressed
    run = fold([event(EventKind.SOFT_BOUNCE, day) for day in (0, 3, 6)])
    assert verdict(run, POLICY).suppression == "soft_bounce"
    assert not verdict(
        fold([event(EventKind.SOFT_BOUNCE, day) for day in (0, 3)]), POLICY
    ).suppressed


def test_a_delivery_clears_the_soft_count() -> None:
    """A delivered message proves the mailbox works: earlier soft bounces stop counting."""
    events = [
        event(EventKind.SOFT_BOUNCE, 0),
        event(EventKind.SOFT_BOUNCE, 1),
        event(EventKind.DELIVERED, 2),
        event(EventKind.SOFT_BOUNCE, 3),
    ]
    record = fold(events)
    assert len(record.soft_bounces) == 1
    assert not verdict(record, POLICY).suppressed


def test_a_policy_reason_never_replaces_an_admins() -> None:
    """An operator's own suppression keeps its reason; a weaker policy reason is upgraded."""
    assert not stronger_reason("admin", "complaint")
    assert stronger_reason("soft_bounce", "hard_bounce")
    assert not stronger_reason("complaint", "hard_bounce")
    assert stronger_reason(None, "soft_bounce")


def test_the_policy_refuses_a_meaningless_configuration() -> None:
    """A limit of zero would suppress every address at its first soft bounce."""
    with pytest.raises(ValueError, match="soft_bounce_limit"):
        BouncePolicy(soft_bounce_limit=0)
    with pytest.raises(ValueError, match="soft_bounce_window"):
        BouncePolicy(soft_bounce_window=timedelta(0))


events_strategy = st.lists(
    st.builds(
        event,
        st.sampled_from(list(EventKind)),
        st.integers(min_value=0, max_value=40).map(float),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(events=events_strategy, data=st.data())
def test_the_outcome_does_not_depend_on_order_or_repetition(
    events: list[FeedbackEvent], data: st.DataObject
) -> None:
    """Providers report late, out of order and twice (AUD-13): the record and the verdict
    must be the same for any arrival order, with any event repeated."""
    shuffled = data.draw(st.permutations(events))
    repeated = data.draw(st.lists(st.sampled_from(events), max_size=5)) if events else []
    reference = fold(events)
    other = fold([*shuffled, *repeated])
    assert other == reference
    assert verdict(other, POLICY) == verdict(reference, POLICY)
