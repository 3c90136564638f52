"""Admin API key format: `tdk_<id>_<secret><checksum>`, recognisable, checksummed, typo-proof.

The id part (10 lowercase characters) is stored in clear and used for lookup; the secret part
(32 base62 characters, ~190 bits) is never stored, only a SHA-256 of the whole key. The last
six characters are a base62 CRC-32 of everything before them, so a mistyped or truncated key
is refused without a database lookup and secret scanners can recognise real keys.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string
import zlib
from dataclasses import dataclass

PREFIX = "tdk_"
_ID_ALPHABET = string.ascii_lowercase + string.digits
_BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
_ID_LENGTH = 10
_SECRET_LENGTH = 32
_CHECKSUM_LENGTH = 6
_PATTERN = re.compile(r"^tdk_([a-z0-9]{10})_([0-9A-Za-z]{32})([0-9A-Za-z]{6})$")


@dataclass(frozen=True, slots=True)
class ParsedKey:
    key_id: str
    token: str

    @property
    def secret_hash(self) -> str:
        return hash_token(self.token)


def _base62(number: int, width: int) -> str:
    digits = []
    while number:
        number, remainder = divmod(number, 62)
        digits.append(_BASE62[remainder])
    return "".join(reversed(digits)).rjust(width, "0")


def _checksum(body: str) -> str:
    return _base62(zlib.crc32(body.encode()), _CHECKSUM_LENGTH)


def generate_key() -> ParsedKey:
    """A fresh key; the caller shows `token` once and stores only `secret_hash`."""
    key_id = "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_LENGTH))
    secret = "".join(secrets.choice(_BASE62) for _ in range(_SECRET_LENGTH))
    body = f"{PREFIX}{key_id}_{secret}"
    return ParsedKey(key_id=key_id, token=body + _checksum(body))


def parse_key(token: str) -> ParsedKey | None:
    """The key's parts if `token` is well-formed with a valid checksum, else None."""
    match = _PATTERN.match(token)
    if match is None:
        return None
    body = token[:-_CHECKSUM_LENGTH]
    if not hmac.compare_digest(_checksum(body), match.group(3)):
        return None
    return ParsedKey(key_id=match.group(1), token=token)


def hash_token(token: str) -> str:
    # The secret has ~190 bits of entropy, so a fast hash is safe; no password KDF is needed.
    return hashlib.sha256(token.encode()).hexdigest()


def hashes_match(stored_hash: str, presented: ParsedKey) -> bool:
    return hmac.compare_digest(stored_hash, presented.secret_hash)
