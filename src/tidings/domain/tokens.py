"""Tokens in links people get by email (AUD-6, AUD-7).

Confirmation tokens are random, expire, and are stored only as hashes; they are minted when
the email carrying them is rendered for sending, so the queue never holds one. Unsubscribe and
preferences tokens are HMAC-signed ids scoped to one purpose: they must keep working in mail
that is already out (API-1), so they are derived, not stored. All comparisons are constant-time.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import re
import secrets
from datetime import datetime
from functools import lru_cache
from typing import Any

# `<id>.<signature>`, or `<id>-<recipient id>.<signature>` for a campaign's unsubscribe link,
# which names the recipient row it was mailed to so the campaign's statistics count it exactly.
SIGNED_TOKEN_PATTERN = r"[0-9]{1,19}(?:-[0-9]{1,19})?\.[A-Za-z0-9_-]{32}"  # noqa: S105 - a regex
_SIGNED = re.compile(r"^([0-9]{1,19})(?:-([0-9]{1,19}))?\.([A-Za-z0-9_-]{32})$")
_RANDOM = re.compile(r"^[A-Za-z0-9_-]{43}$")
_SHA256_BLOCK = 64
_IPAD = bytes(byte ^ 0x36 for byte in range(256))
_OPAD = bytes(byte ^ 0x5C for byte in range(256))
_URL_SAFE = bytes.maketrans(b"+/", b"-_")


def new_confirmation_token() -> str:
    return secrets.token_urlsafe(32)  # 43 characters, 256 bits


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def is_well_formed_confirmation_token(token: str) -> bool:
    return bool(_RANDOM.match(token))


def _signature(
    secret: str, purpose: str, object_id: int, row_stamp: datetime, recipient_id: int | None
) -> str:
    # The row's creation time is signed too: if the row is deleted and its id reused (SQLite
    # reuses ids), a link from old mail does not reach the new person.
    stamp = int(row_stamp.timestamp() * 1_000_000)
    inner, outer = _hmac_pads(secret)
    inner = inner.copy()
    message = f"{purpose}:{object_id}:{stamp}"
    if recipient_id is not None:  # a different message: neither form passes for the other
        message += f":recipient:{recipient_id}"
    inner.update(message.encode())
    outer = outer.copy()
    outer.update(inner.digest())
    # 24 bytes are exactly 32 base64 characters: the first 32 of the whole digest's encoding.
    return binascii.b2a_base64(outer.digest()[:24], newline=False).translate(_URL_SAFE).decode()


@lru_cache(maxsize=4)
def _hmac_pads(secret: str) -> tuple[Any, Any]:
    """HMAC-SHA256 (RFC 2104) with the key schedule done once per secret: the inner and outer
    hashes already fed their padded keys. `hmac.HMAC.copy` does the same in Python at twice
    the cost, and every recipient of a campaign takes two links (a test checks the result
    equals `hmac.new`)."""
    key = secret.encode()
    if len(key) > _SHA256_BLOCK:
        key = hashlib.sha256(key).digest()
    key = key.ljust(_SHA256_BLOCK, b"\0")
    return hashlib.sha256(key.translate(_IPAD)), hashlib.sha256(key.translate(_OPAD))


def sign(
    secret: str,
    purpose: str,
    object_id: int,
    row_stamp: datetime,
    *,
    recipient_id: int | None = None,
) -> str:
    """`<id>.<signature>`, valid only for `purpose` (e.g. unsubscribe) and this row; with
    `recipient_id` (a campaign's recipient row), `<id>-<recipient id>.<signature>`."""
    signature = _signature(secret, purpose, object_id, row_stamp, recipient_id)
    named = object_id if recipient_id is None else f"{object_id}-{recipient_id}"
    return f"{named}.{signature}"


def signed_id(token: str) -> int | None:
    """The id a well-formed signed token names (not yet verified), else None."""
    match = _SIGNED.match(token)
    return None if match is None else int(match.group(1))


def signed_recipient(token: str) -> int | None:
    """The recipient row a well-formed signed token names (verify it first), else None."""
    match = _SIGNED.match(token)
    return None if match is None or match.group(2) is None else int(match.group(2))


def verify(secret: str, purpose: str, token: str, row_stamp: datetime) -> bool:
    """True when `token` was signed for `purpose` and the row with this id and creation time
    (and, when it names one, that recipient row)."""
    match = _SIGNED.match(token)
    if match is None:
        return False
    recipient_id = None if match.group(2) is None else int(match.group(2))
    expected = _signature(secret, purpose, int(match.group(1)), row_stamp, recipient_id)
    return hmac.compare_digest(expected, match.group(3))


def keyed_email_hash(secret: str, email_key: str, outer_key: str | None = None) -> str:
    """HMAC of a normalised address (AUD-8): a plain hash can be reversed by guessing. With
    `outer_key` (the suppression key kept outside the database), that HMAC is keyed again
    with it, so a database dump, which holds the site secret, cannot be used to test guesses."""
    inner = hmac.new(secret.encode(), b"email:" + email_key.encode(), hashlib.sha256).hexdigest()
    return inner if outer_key is None else rekeyed_email_hash(outer_key, inner)


def rekeyed_email_hash(outer_key: str, site_keyed_hash: str) -> str:
    """The hash under `outer_key` of an address whose site-keyed hash is given: existing rows
    move to the outer key without knowing the address (deleted people's suppressions too)."""
    message = b"email-outer:" + site_keyed_hash.encode()
    return hmac.new(outer_key.encode(), message, hashlib.sha256).hexdigest()


def key_fingerprint(key: str) -> str:
    """Identifies a key without revealing it (an HMAC of a fixed message), to tell at start-up
    which key the stored hashes were made with."""
    return hmac.new(key.encode(), b"tidings key fingerprint", hashlib.sha256).hexdigest()[:32]


# The unsubscribe and preferences token in a campaign's test send (CMP-5): a test recipient is
# not a subscriber, so the links open a page that says the message was a test.
TEST_SEND_TOKEN = "test-send"  # noqa: S105 - a placeholder, not a secret


def is_test_send_token(token: str) -> bool:
    return token == TEST_SEND_TOKEN
