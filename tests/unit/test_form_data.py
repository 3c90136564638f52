"""Form bodies for the Mailgun API: what we encode, standard parsers read; what clients send,
we read (PRV-2, PRV-4)."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import Request
from starlette.types import Message

from tidings.delivery.form_data import (
    FilePart,
    FormError,
    encode_multipart,
    parse_form,
    parse_form_parts,
)

field_names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters='"\r\n;'), min_size=1, max_size=20
)
field_values = st.text(alphabet=st.characters(codec="utf-8"), max_size=200)
AWKWARD = [
    ("to", "a@example.com"),
    ("to", "b@example.com"),
    ("html", "line one\r\n--not-a-boundary\r\n\r\nCafé ☕"),
    ("text", ""),
    ("h:List-Unsubscribe", "<https://example.com/u/%recipient.token%>"),
]


@given(st.lists(st.tuples(field_names, field_values), max_size=20))
def test_every_encoded_form_parses_back_to_the_same_fields(fields: list[tuple[str, str]]) -> None:
    """The dev server must see exactly the fields the client sent, in order, repeats included."""
    content_type, body = encode_multipart(fields)
    assert parse_form(content_type, body) == fields


# A serialised message as messages.mime takes it: bytes that are not UTF-8, bare LFs, and a
# line that looks like a form boundary.
MESSAGE = FilePart(
    "message.mime",
    "message/rfc822",
    b"Subject: =?iso-8859-1?q?Caf=E9?=\nContent-Transfer-Encoding: 8bit\n\n\xe9\r\n--x--\r\n",
)


@given(st.lists(st.tuples(field_names, field_values), max_size=5), st.binary(max_size=300))
def test_a_file_part_parses_back_byte_for_byte_among_text_fields(
    fields: list[tuple[str, str]], data: bytes
) -> None:
    """A message sent as a file must reach the provider exactly as serialised, or DKIM breaks."""
    sent: list[tuple[str, str | FilePart]] = [
        *fields,
        ("message", FilePart("message.mime", "message/rfc822", data)),
        ("to", "a@example.com"),
    ]
    content_type, body = encode_multipart(sent)
    assert parse_form_parts(content_type, body) == sent


def test_parse_form_refuses_file_parts() -> None:
    """The batch endpoint takes no files; one there is a client bug to report, not to drop."""
    content_type, body = encode_multipart([("to", "a@example.com"), ("message", MESSAGE)])
    with pytest.raises(FormError, match="file parts are not supported"):
        parse_form(content_type, body)


async def test_a_standard_multipart_parser_reads_our_encoding() -> None:
    """Mailgun is not our parser: the encoding must be what any form-data parser expects."""
    content_type, body = encode_multipart([*AWKWARD, ("message", MESSAGE)])
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        assert not delivered
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    headers = [(b"content-type", content_type.encode())]
    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    async with Request(scope, receive).form() as form:
        *fields, (name, upload) = form.multi_items()
        assert fields == AWKWARD
        assert name == "message"
        assert not isinstance(upload, str)
        assert (upload.filename, upload.content_type) == (MESSAGE.filename, MESSAGE.content_type)
        assert await upload.read() == MESSAGE.data


@pytest.mark.parametrize("multipart", [True, False])
def test_reads_the_forms_httpx_sends(multipart: bool) -> None:
    """curl, SDKs and the bare benchmark client send both kinds of form; both must be read."""
    files = {"extra": (None, b"part")} if multipart else None
    request = httpx.Request(
        "POST", "http://x", data={"to": ["a@x.org", "b@x.org"], "subject": "Hi & bye"}, files=files
    )
    fields = parse_form(request.headers["content-type"], request.read())
    assert fields[:3] == [("to", "a@x.org"), ("to", "b@x.org"), ("subject", "Hi & bye")]


def test_reads_a_file_that_httpx_uploads() -> None:
    """SDKs upload the MIME message as `files=`; the dev server must find it with its bytes."""
    request = httpx.Request(
        "POST",
        "http://x",
        data={"to": "a@x.org"},
        files={"message": ("m.eml", MESSAGE.data, "message/rfc822")},
    )
    parsed = parse_form_parts(request.headers["content-type"], request.read())
    assert parsed == [
        ("to", "a@x.org"),
        ("message", FilePart("m.eml", "message/rfc822", MESSAGE.data)),
    ]


MULTIPART_B = "multipart/form-data; boundary=b"
PART_A = b'--b\r\nContent-Disposition: form-data; name="a"'


@pytest.mark.parametrize(
    ("content_type", "body", "problem"),
    [
        ("application/json", b"{}", "expected multipart"),
        ("multipart/form-data", b"", "no boundary"),
        (MULTIPART_B, PART_A, "final"),
        (MULTIPART_B, PART_A + b'; filename="x"\r\n\r\nv\r\n--b--', "file"),
        (MULTIPART_B, b"--b\r\nX-Other: 1\r\n\r\nv\r\n--b--", "no form-data name"),
        (MULTIPART_B, PART_A + b"\r\n\r\n\xff\r\n--b--", "UTF-8"),
    ],
)
def test_unreadable_forms_are_refused_with_the_reason(
    content_type: str, body: bytes, problem: str
) -> None:
    """A malformed request must become a 400 naming the problem, never a crash or a guess."""
    with pytest.raises(FormError, match=problem):
        parse_form(content_type, body)


def test_field_names_that_would_break_the_part_header_are_refused() -> None:
    """A quote or line break in a name would corrupt the body; the encoder must refuse it."""
    with pytest.raises(ValueError, match="field name"):
        encode_multipart([('bad"name', "v")])
    with pytest.raises(ValueError, match="file name"):
        encode_multipart([("message", FilePart("a\r\nX: y", "message/rfc822", b""))])
