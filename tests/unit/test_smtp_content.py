"""The DATA content and the command-line paths the SMTP session builds itself (RFC 5321)."""

from __future__ import annotations

import pytest
from aiosmtplib.protocol import PERIOD_REGEX, normalize_message_line_endings
from hypothesis import given
from hypothesis import strategies as st

from tidings.delivery.smtp_session import content, path

# Lines, line endings of every kind and leading dots, mixed: what dot-stuffing must survive.
PIECES = st.sampled_from([b"\r\n", b"\n", b"\r", b".", b"..", b"a", b"\xc3\xa9", b" ", b"\r\n."])


@given(st.lists(PIECES, max_size=40).map(b"".join))
def test_content_is_what_aiosmtplib_would_have_sent(message: bytes) -> None:
    """The session builds DATA itself to skip two regex passes a message; the relay must
    still receive, byte for byte, what aiosmtplib's own DATA would have sent."""
    expected = PERIOD_REGEX.sub(b"..", normalize_message_line_endings(message)) + b".\r\n"
    assert content(message) == expected


def test_content_of_a_built_message_ends_with_the_terminating_dot_line() -> None:
    """A line of one dot inside the message must not end it early (RFC 5321 4.5.2)."""
    assert content(b"a\r\n.\r\nb\r\n") == b"a\r\n..\r\nb\r\n.\r\n"


@pytest.mark.parametrize(
    "address",
    ["a@example.com\r\nRCPT TO:<b@example.com>", "a b@example.com", "<a@example.com>", "", "\x00"],
)
def test_an_address_that_would_break_the_command_line_is_refused(address: str) -> None:
    """CR/LF in an address would inject a command into the relay conversation."""
    with pytest.raises(ValueError, match="command line"):
        path(address, "ascii")


def test_a_non_ascii_address_needs_smtputf8() -> None:
    """Without SMTPUTF8 the relay cannot take it: refused here, not garbled on the wire."""
    with pytest.raises(ValueError, match="SMTPUTF8"):
        path("jos\u00e9@example.com", "ascii")
    assert path("jos\u00e9@example.com", "utf-8") == "<jos\u00e9@example.com>".encode()
