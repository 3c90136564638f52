"""VERP return paths (PRV-6): a bounce names its recipient row, and only a genuine one can."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.verp import recipient_of, return_path, tag_of

BOUNCES = "bounces@mail.example.org"


@given(st.integers(min_value=1, max_value=2**62))
def test_a_return_path_names_its_recipient_row(recipient_id: int) -> None:
    """Whatever row a message went to, its bounce leads back to that row."""
    address = return_path(BOUNCES, "secret", recipient_id)
    tag = tag_of(address.upper(), BOUNCES)  # MTAs may change the case of a local part
    assert tag is not None
    assert recipient_of(tag, "secret") == recipient_id


def test_a_forged_or_foreign_tag_names_no_row() -> None:
    """Anyone can mail the bounce address: a made-up tag must not suppress a reader."""
    genuine = tag_of(return_path(BOUNCES, "secret", 42), BOUNCES)
    assert genuine is not None
    assert recipient_of(genuine, "another secret") is None
    assert recipient_of(genuine.replace("42-", "43-"), "secret") is None
    assert recipient_of("", "secret") is None
    assert tag_of("bounces@mail.example.org", BOUNCES) == ""
    assert tag_of("someone+1-00@mail.example.org", BOUNCES) is None
    assert tag_of("bounces+1-00@elsewhere.example.org", BOUNCES) is None
