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


@pytest.mark.parametrize(
    ("text", "attributes", "expected"),
    [
        ("attr:city=Paris", {"city": "Paris"}, True),
        ("attr:city=Paris", {"city": "paris"}, False),
        ("attr:city=Paris", {}, False),
        ("!attr:city=Paris", {}, True),
        ("attr:age=42", {"age": 42}, True),
        ("attr:age=42", {"age": "42"}, True),
        ("attr:vip=true", {"vip": True}, False),
        ("attr:Home-Town=New York", {"Home-Town": "New York"}, True),
        ("tier:free+attr:city=Paris", {"city": "Paris"}, True),
    ],
)
def test_attribute_terms_match_the_text_of_the_value(
    text: str, attributes: dict[str, object], expected: bool
) -> None:
    """`attr:city=Paris` (AUD-12) targets custom fields as docs/rendering.md says; case in
    the value matters because it is the subscriber's data."""
    audience = parse_filter(text)
    assert audience.matches("free", frozenset(), attributes) is expected
    assert str(parse_filter(str(audience))) == str(audience)


def test_a_malformed_attribute_term_names_the_problem() -> None:
    """An `attr:` term without `=VALUE` is refused when the campaign is saved."""
    for text in ("attr:city", "attr:=Paris", "attr:ci ty=Paris"):
        with pytest.raises(InvalidInput, match="attr:city=Paris"):
            parse_filter(text)
