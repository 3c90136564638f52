"""Operator passwords must resist guessing (UI-2): long enough, not blank, not common, and
strong by zxcvbn's estimate."""

import pytest

from tidings.access.passwords import check_password
from tidings.domain.errors import InvalidInput


@pytest.mark.parametrize(
    ("password", "reason"),
    [
        ("short-pass1", "12-1024 characters"),
        (" " * 12, "whitespace"),
        ("\t \n" * 5, "whitespace"),
        ("password1234", "common passwords"),
        ("qwertyuiop12", "too weak"),
        ("aaaaaaaaaaaaaaaa", "too weak"),
        ("x" * 1025, "12-1024 characters"),
    ],
)
def test_weak_passwords_are_refused_naming_the_field(password: str, reason: str) -> None:
    """Each refusal says why, so the operator can choose a better one."""
    with pytest.raises(InvalidInput) as refused:
        check_password(password)
    assert refused.value.field == "password"
    assert reason in refused.value.detail


def test_the_operators_own_address_does_not_make_a_password_strong() -> None:
    """`ada.lovelace2026` is guessable by whoever knows the account is ada.lovelace's."""
    check_password("ada.lovelace2026")
    with pytest.raises(InvalidInput):
        check_password("ada.lovelace2026", related=("ada.lovelace@gazette.org",))


@pytest.mark.parametrize(
    "password", ["correct horse battery staple", "Tr0ub4dor&3-mellow-quince", "ünïcødé wörds hère"]
)
def test_strong_passwords_are_accepted(password: str) -> None:
    """A few unrelated words make a password both strong and memorable."""
    check_password(password)
