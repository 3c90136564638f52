"""Campaign audience filters parse, validate with clear errors, and match as documented."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.errors import InvalidInput
from tidings.domain.segments import TIERS, parse_filter


@pytest.mark.parametrize(
    ("text", "tier", "labels", "expected"),
    [
        ("", "free", set(), True),
        ("tier:paid", "paid", set(), True),
        ("tier:paid", "free", set(), False),
        ("label:beta", "free", {"beta"}, True),
        ("tier:free+label:beta", "free", {"beta"}, True),
        ("tier:free+label:beta", "paid", {"beta"}, False),
        ("!label:press", "free", {"press"}, False),
        ("!label:press", "free", set(), True),
        ("tier:paid,tier:comped", "comped", set(), True),
        ("TIER:Paid + label:Beta", "paid", {"beta"}, True),
    ],
)
def test_filter_matches_as_documented(
    text: str, tier: str, labels: set[str], expected: bool
) -> None:
    """The filter grammar does what docs/rendering.md says, or campaigns reach the wrong people."""
    assert parse_filter(text).matches(tier, frozenset(labels)) is expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tier:gold", "tier must be one of"),
        ("label:", "is not a term"),
        ("paid", "is not a term"),
        ("tier:paid++label:x", "is not a term"),
        ("label:has space", "is not a term"),
        ("x" * 600, "at most 500"),
    ],
)
def test_malformed_filter_names_the_problem(text: str, message: str) -> None:
    """A filter is validated when the campaign is saved, not when it sends."""
    with pytest.raises(InvalidInput, match=message) as caught:
        parse_filter(text)
    assert caught.value.field == "audience_filter"


def test_tiers_reachable_by_a_filter() -> None:
    """The campaign renders one version per tier its audience can reach."""
    assert parse_filter("").tiers() == TIERS
    assert parse_filter("tier:paid").tiers() == ("paid",)
    assert parse_filter("!tier:free").tiers() == ("paid", "comped")
    assert parse_filter("label:beta").tiers() == TIERS
    assert parse_filter("tier:free+label:beta,tier:comped").tiers() == ("free", "comped")


terms = st.sampled_from(["tier:free", "tier:paid", "tier:comped", "label:a", "label:b"])


@given(
    clauses=st.lists(
        st.lists(st.tuples(st.booleans(), terms), min_size=1, max_size=3), min_size=1, max_size=3
    )
)
def test_filter_text_round_trips(clauses: list[list[tuple[bool, str]]]) -> None:
    """A stored filter reads back as the same filter."""
    text = ",".join(
        "+".join(("!" if neg else "") + term for neg, term in clause) for clause in clauses
    )
    parsed = parse_filter(text)
    assert parse_filter(str(parsed)) == parsed
