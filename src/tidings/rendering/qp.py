"""Quoted-printable bodies with holes: encode a segment once, drop recipient values in later.

Why quoted-printable (and not 8bit or base64) for both body parts:

* base64 mixes every byte with its neighbours, so one substituted value means re-encoding the
  whole part for every recipient: correct, but it throws away the point of a skeleton.
* 8bit needs the receiving server to offer 8BITMIME and every line to stay under 998 octets
  *after* substitution; a long name or several values on one line could break that.
* quoted-printable is 7-bit clean and its soft line break (`=` CRLF) is invisible to the
  reader. So the skeleton puts a soft break before and after every slot: each value starts
  on its own line at column 0, is QP-encoded on its own (C-speed `binascii.b2a_qp`) and
  wrapped to 75 characters if long. Line length stays within RFC 2045's 76 whatever the
  values are, and the decoded text is exactly the segment text with the values in place.
"""

from __future__ import annotations

import binascii
import re

# Leave room for the `=` of a soft line break: encoded lines are at most 76 characters.
_LINE = 75
_SOFT_BREAK = b"=\r\n"
_EQUALS = ord("=")
_WHITESPACE = frozenset(b" \t")
# Encoded form of every byte; printable ASCII except `=` stands for itself.
_TABLE = [
    bytes([byte])
    if (33 <= byte <= 126 and byte != _EQUALS) or byte in _WHITESPACE
    else f"={byte:02X}".encode()
    for byte in range(256)
]


def encode_with_slots(text: str, slot_pattern: re.Pattern[str]) -> tuple[list[bytes], list[int]]:
    """`text` as QP with CRLF line ends, cut at every slot token.

    Returns `parts` and `slots` with `len(parts) == len(slots) + 1`: the message is
    `parts[0] + value(slots[0]) + parts[1] + …`, each value given by `encode_value`.
    """
    pieces = slot_pattern.split(text.replace("\r\n", "\n").replace("\r", "\n"))
    if not pieces[-1].endswith("\n"):
        pieces[-1] += "\n"  # a body ends with a line end; it also makes trailing spaces safe
    parts: list[bytes] = []
    slots: list[int] = []
    buffer = bytearray()
    column = 0
    for position, piece in enumerate(pieces):
        if position % 2:
            if column:
                buffer += _SOFT_BREAK
            parts.append(bytes(buffer))
            slots.append(int(piece))
            buffer = bytearray(_SOFT_BREAK)  # ends the value's line, whatever its length
            column = 0
        else:
            column = _encode_literal(piece, buffer, column)
    parts.append(bytes(buffer))
    return parts, slots


def _encode_literal(piece: str, buffer: bytearray, column: int) -> int:
    lines = piece.encode("utf-8").split(b"\n")
    for number, line in enumerate(lines):
        if number:
            buffer += b"\r\n"
            column = 0
        last = len(line) - 1
        hard_break_follows = number < len(lines) - 1
        for index, byte in enumerate(line):
            if index == last and hard_break_follows and byte in _WHITESPACE:
                encoded = f"={byte:02X}".encode()  # trailing space before CRLF would be lost
            else:
                encoded = _TABLE[byte]
            if column + len(encoded) > _LINE:
                buffer += _SOFT_BREAK
                column = 0
            buffer += encoded
            column += len(encoded)
    return column


def encode_value(value: bytes) -> bytes:
    """One recipient value as QP, for a slot that starts at column 0 and ends with `=` CRLF."""
    encoded = binascii.b2a_qp(value)
    if len(encoded) <= _LINE and b"\n" not in encoded:
        return encoded  # the common case: a name, a token, an id
    return _wrap(encoded.replace(b"=\n", b""))


def _wrap(encoded: bytes) -> bytes:
    lines: list[bytes] = []
    start = 0
    while len(encoded) - start > _LINE:
        cut = start + _LINE
        # Never split an `=XX` escape across lines.
        if encoded[cut - 1] == _EQUALS:
            cut -= 1
        elif encoded[cut - 2] == _EQUALS:
            cut -= 2
        lines.append(encoded[start:cut])
        start = cut
    lines.append(encoded[start:])
    return _SOFT_BREAK.join(lines)
