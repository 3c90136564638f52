"""Campaign headers are exact, parse back as written, and cannot be injected into (CMP-4)."""

import hashlib
from email.header import decode_header, make_header
from email.headerregistry import HeaderRegistry
from email.parser import BytesParser
from email.policy import default
from email.utils import getaddresses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.audience import normalise_email
from tidings.domain.email_headers import (
    MAX_DISPLAY_NAME,
    address_problem,
    check_address,
    check_header_value,
    check_header_values,
    clean_display_name,
    feedback_id,
    header_text_problem,
    list_id,
    list_unsubscribe,
    mailbox_header,
    message_id,
)
from tidings.domain.errors import InvalidInput


def _parse_headers(lines: str) -> dict[str, str]:
    message = BytesParser(policy=default).parsebytes((lines + "\r\n\r\n").encode("ascii"))
    return {name: str(value) for name, value in message.items()}


def test_message_id_is_campaign_dot_sha256_prefix_at_sending_domain() -> None:
    """Support finds a message at the provider from the campaign id and address alone."""
    expected = hashlib.sha256(b"c42:ann@example.org").hexdigest()[:32]
    assert message_id("c42", "ann@example.org", "news.example.com") == (
        f"<c42.{expected}@news.example.com>"
    )


def test_message_id_differs_per_address_and_per_campaign() -> None:
    """Two recipients (or two campaigns) sharing an id would collapse in threads and logs."""
    ids = {
        message_id("1", "a@example.org", "example.com"),
        message_id("1", "b@example.org", "example.com"),
        message_id("2", "a@example.org", "example.com"),
    }
    assert len(ids) == 3


@pytest.mark.parametrize("value", ["a\rb", "a\nb", "a\r\nBcc: x@evil.test", "a\x00b", "a\u2028b"])
@pytest.mark.parametrize("field", ["subject", "sender_name", "reply_to", "preheader"])
def test_a_line_break_in_a_header_bound_field_is_refused(field: str, value: str) -> None:
    """A CR or LF in a header value starts a new header: refuse it at input, naming the field."""
    with pytest.raises(InvalidInput) as raised:
        check_header_values({field: value})
    assert raised.value.field == field


def test_single_line_values_and_unset_fields_pass() -> None:
    """The guard must not refuse ordinary text, punctuation or non-ASCII letters."""
    check_header_values({"subject": "Grüße — 50% off: today only!", "reply_to": None})
    check_header_value("sender_name", "O'Brien & Sons")


@pytest.mark.parametrize(
    "address",
    [
        "ann@example.org\r\nBcc: all@example.org",
        "ann@example.org, bob@example.org",
        "Ann <ann@example.org>",
        "ann@example.org>",
        "ann example.org",
        "ann@",
        "ánn@example.org",
    ],
)
def test_an_address_that_is_not_one_plain_addr_spec_is_refused(address: str) -> None:
    """The address is written raw into To; anything beyond one addr-spec could add recipients."""
    with pytest.raises(InvalidInput):
        check_address("address", address)


def test_mailbox_header_quotes_specials_and_encodes_non_ascii() -> None:
    """Display names with commas or accents must not split the address or arrive as mojibake."""
    assert mailbox_header("ann@example.org", "Smith, Ann") == '"Smith, Ann" <ann@example.org>'
    encoded = mailbox_header("zoe@example.org", "Zoë Müller")
    assert encoded.isascii()
    assert "=?utf-8?" in encoded
    assert _parse_headers(f"To: {encoded}")["To"] == "Zoë Müller <zoe@example.org>"


def test_mailbox_header_without_a_name_is_the_bare_address() -> None:
    """A subscriber with no name (or only whitespace) gets no empty quotes in To."""
    assert mailbox_header("ann@example.org", None) == "ann@example.org"
    assert mailbox_header("ann@example.org", "  \t ") == "ann@example.org"


names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=MAX_DISPLAY_NAME
) | st.text(alphabet=' "\\=?()<>,;:@.aé', max_size=40)  # header syntax, dense


@given(name=names)
def test_any_display_name_parses_back_to_the_cleaned_name(name: str) -> None:
    """Whatever a subscriber typed, To parses back to one mailbox with that name, never two."""
    value = mailbox_header("ann@example.org", name)
    parsed = BytesParser(policy=default).parsebytes(f"To: {value}\r\n\r\n".encode("ascii"))
    (address,) = parsed["To"].addresses
    assert address.addr_spec == "ann@example.org"
    # Long non-ASCII names fold into several encoded words. RFC 2047 says the space between
    # them is not text; the legacy decoder follows that, the `policy.default` address parser
    # keeps the space. So the name is checked with the RFC-conforming decoder.
    ((display, addr_spec),) = getaddresses([value])
    assert addr_spec == "ann@example.org"
    assert str(make_header(decode_header(display))) == (clean_display_name(name) or "")


def test_clean_display_name_turns_controls_into_spaces() -> None:
    """Names come from imports and forms; a stray tab or CR must not reach a header or a body."""
    assert clean_display_name("Ann\r\nSmith\x00") == "Ann Smith"
    assert clean_display_name("\x07") is None


def test_list_headers_have_the_documented_shape() -> None:
    """Providers and mailbox filters parse these; the shape is the contract (RFC 2369/2919/8058)."""
    unsubscribe = list_unsubscribe(
        "https://n.example.com/unsubscribe/tok", "unsubscribe@example.com", "tok"
    )
    headers = _parse_headers(
        f"List-Unsubscribe: {unsubscribe}\r\n"
        f"List-Id: {list_id('The Ledger', 'ledger', 'example.com')}\r\n"
        f"Feedback-ID: {feedback_id('1001', 'ledger', 'example.com')}"
    )
    assert headers["List-Unsubscribe"] == (
        "<https://n.example.com/unsubscribe/tok>, "
        "<mailto:unsubscribe@example.com?subject=unsubscribe-tok>"
    )
    assert headers["List-Id"] == "The Ledger <ledger.example.com>"
    assert headers["Feedback-ID"] == "1001:ledger:tidings:example.com"


def test_list_unsubscribe_without_a_mailbox_is_the_one_click_url_alone() -> None:
    """With no unsubscribe mailbox configured nothing would act on a `mailto:`, so none is
    offered; the https target (RFC 8058 one-click) is always there."""
    unsubscribe = list_unsubscribe("https://n.example.com/unsubscribe/tok", None, "tok")
    headers = _parse_headers(f"List-Unsubscribe: {unsubscribe}")
    assert headers["List-Unsubscribe"] == "<https://n.example.com/unsubscribe/tok>"


def test_a_non_ascii_list_name_is_encoded_in_list_id() -> None:
    """A header must be ASCII on the wire; the list name still reads correctly once decoded."""
    value = list_id("Café Notes", "cafe", "example.com")
    assert value.isascii()
    registry = HeaderRegistry()
    assert str(registry("List-Id", value)) == "Café Notes <cafe.example.com>"


@pytest.mark.parametrize(
    "value",
    [
        "a\x0bb",
        "a\x0cb",
        "a\x1cb",
        "a\x1db",
        "a\x1eb",
        "a\x85b",
        "a\u2028b",
        "a\u2029b",
        "a\tb",
        "a\x7fb",
        "a\x9fb",
        "a\ud800b",
        "=?UTF-8?Q?=0A?=Bcc: all@example.org",
        "Ann =?iso-8859-1*en?b?QQ==?=",
    ],
)
def test_the_header_rule_refuses_every_line_end_control_and_encoded_word(value: str) -> None:
    """The email package splits header values at any `str.splitlines` line end and decodes
    encoded-words, so each of these could forge a header; the one rule refuses them all."""
    assert header_text_problem(value) is not None
    with pytest.raises(InvalidInput) as raised:
        check_header_value("subject", value)
    assert raised.value.field == "subject"


@pytest.mark.parametrize("value", ["2+2=?", "Why =? not", "Zoë 👩‍💻", 'The "Ledger", No. 5'])
def test_the_header_rule_accepts_text_that_only_looks_unusual(value: str) -> None:
    """A bare `=?` is no encoded-word, and emoji sequences are ordinary subjects."""
    assert header_text_problem(value) is None


@pytest.mark.parametrize(
    "address", ["a,b@example.com", 'x"<y>@example.com', "k@\x02example.com", "a@b@example.com"]
)
def test_an_address_is_exactly_one_addr_spec(address: str) -> None:
    """Each of these is read as two mailboxes, a quoted local part or a control character by some
    parser; refused as input, they cannot reach a To header."""
    assert address_problem(address) is not None
    with pytest.raises(InvalidInput):
        normalise_email(address)
