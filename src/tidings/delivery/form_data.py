"""HTML form bodies as the Mailgun API takes them: multipart/form-data out, either kind in.

A 1,000-recipient batch is a thousand `to` fields beside a large HTML body, so both halves are
written for that shape: the encoder joins pre-built byte strings (no per-field objects, no
percent-encoding of the HTML), and the parser splits on the boundary with `bytes.split`
instead of feeding a streaming parser byte by byte. Field names and values are text, except
file parts (`FilePart`): a serialised message goes to `messages.mime` as a file, byte for byte.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl

MULTIPART = "multipart/form-data"
URLENCODED = "application/x-www-form-urlencoded"
OCTET_STREAM = "application/octet-stream"


class FormError(ValueError):
    """The body is not a form this module can read."""


@dataclass(frozen=True, slots=True)
class FilePart:
    """A file upload in a form: `data` as is, under `filename`, of type `content_type`."""

    filename: str
    content_type: str
    data: bytes


def encode_multipart(fields: Sequence[tuple[str, str | FilePart]]) -> tuple[str, bytes]:
    """(Content-Type, body) of a multipart/form-data body holding `fields` in order."""
    heads: dict[str, bytes] = {}
    parts: list[bytes] = []
    for name, value in fields:
        if isinstance(value, FilePart):
            parts.append(
                b'Content-Disposition: form-data; name="%s"; filename="%s"\r\n'
                b"Content-Type: %s\r\n\r\n%s"
                % (
                    _header_safe(name, "form field name"),
                    _header_safe(value.filename, "file name"),
                    _header_safe(value.content_type, "file content type"),
                    value.data,
                )
            )
            continue
        head = heads.get(name)
        if head is None:
            head = heads[name] = b'Content-Disposition: form-data; name="%s"\r\n\r\n' % (
                _header_safe(name, "form field name")
            )
        parts.append(head + value.encode())
    while True:
        boundary = secrets.token_hex(16).encode()
        if not parts:
            body = b"--%s--\r\n" % boundary
        else:
            separator = b"\r\n--%s\r\n" % boundary
            body = b"--%s\r\n%s\r\n--%s--\r\n" % (boundary, separator.join(parts), boundary)
        # 128 random bits never occur in a value in practice, but ruling it out is one scan.
        if body.count(boundary) == len(parts) + 1:
            return f"{MULTIPART}; boundary={boundary.decode()}", body


def _header_safe(text: str, what: str) -> bytes:
    """`text` for a part's header, where a quote or line break would corrupt the body."""
    if not text or any(char in text for char in '"\r\n;'):
        raise ValueError(f"unusable {what}: {text!r}")
    return text.encode()


def parse_form(content_type: str, body: bytes) -> list[tuple[str, str]]:
    """Every (name, value) of a multipart/form-data or urlencoded body without file parts."""
    fields: list[tuple[str, str]] = []
    for name, value in parse_form_parts(content_type, body):
        if isinstance(value, FilePart):
            raise FormError("file parts are not supported")
        fields.append((name, value))
    return fields


def parse_form_parts(content_type: str, body: bytes) -> list[tuple[str, str | FilePart]]:
    """Every (name, value) of a multipart/form-data or urlencoded body, in order; a file part's
    value is a `FilePart`."""
    media_type, _, parameters = content_type.partition(";")
    media_type = media_type.strip().lower()
    if media_type == URLENCODED:
        try:
            return list(parse_qsl(body.decode(), keep_blank_values=True, strict_parsing=False))
        except UnicodeDecodeError:
            raise FormError("the form is not UTF-8") from None
    if media_type != MULTIPART:
        raise FormError(f"expected {MULTIPART} or {URLENCODED}")
    boundary = _parameter(parameters, "boundary")
    if not boundary:
        raise FormError("the multipart body has no boundary")
    return _parse_multipart(body, boundary.encode())


def _parse_multipart(body: bytes, boundary: bytes) -> list[tuple[str, str | FilePart]]:
    # Each delimiter is CRLF "--" boundary; the first one may open the body without the CRLF.
    chunks = (b"\r\n" + body).split(b"\r\n--" + boundary)
    if len(chunks) < 2 or not chunks[-1].startswith(b"--"):
        raise FormError("the multipart body is not closed by its final boundary")
    fields: list[tuple[str, str | FilePart]] = []
    for chunk in chunks[1:-1]:
        head, separator, value = chunk.partition(b"\r\n\r\n")
        if not separator:
            raise FormError("a multipart part has no header block")
        name, filename, media_type = _part_head(head.removeprefix(b"\r\n"))  # boundary's CRLF
        if filename is None:
            fields.append((name, _text(value, f"form field {name!r}")))
        else:
            fields.append((name, FilePart(filename, media_type, value)))
    return fields


def _text(data: bytes, what: str) -> str:
    # RFC 7578: names and values are UTF-8, raw.
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise FormError(f"{what} is not UTF-8") from None


_SIMPLE_HEAD = b'Content-Disposition: form-data; name="'


def _part_head(head: bytes) -> tuple[str, str | None, str]:
    """A part's name, its filename (None: not a file) and its media type."""
    # What this module's encoder (and most clients) write for a text field; anything else
    # takes the long way.
    if head.startswith(_SIMPLE_HEAD) and head.endswith(b'"') and head.count(b'"') == 2:
        return _text(head[len(_SIMPLE_HEAD) : -1], "a multipart part's name"), None, OCTET_STREAM
    name: str | None = None
    filename: str | None = None
    media_type = OCTET_STREAM
    for line in _text(head, "a multipart part's header").split("\r\n"):
        header, _, value = line.partition(":")
        header = header.strip().lower()
        if header == "content-disposition":
            disposition, _, parameters = value.partition(";")
            if disposition.strip().lower() != "form-data":
                break
            name = _parameter(parameters, "name")
            filename = _parameter(parameters, "filename")
        elif header == "content-type":
            media_type = value.strip() or OCTET_STREAM
    if not name:
        raise FormError("a multipart part has no form-data name")
    return name, filename, media_type


def _parameter(parameters: str, wanted: str) -> str | None:
    """A `; key=value` or `; key="value"` parameter of a header, or None."""
    for item in parameters.split(";"):
        key, separator, value = item.partition("=")
        if separator and key.strip().lower() == wanted:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            return value
    return None
