"""Tokens in links people get by email (AUD-6, AUD-7).

Confirmation tokens are random, expire, and are stored only as hashes. Unsubscribe and
preferences tokens are HMAC-signed ids scoped to one purpose: they must keep working in mail
that is already out (API-1), so they are derived, not stored. All comparisons are constant-time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

_SIGNED = re.compile(r"^([0-9]{1,19})\.([A-Za-z0-9_-]{32})$")
_RANDOM = re.compile(r"^[A-Za-z0-9_-]{43}$")


def new_confirmation_token() -> str:
    return secrets.token_urlsafe(32)  # 43 characters, 256 bits


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def is_well_formed_confirmation_token(token: str) -> bool:
    return bool(_RANDOM.match(token))


def confirmation_dedupe_key(token_hash: str) -> str:
    """The outbox dedupe key for a confirmation email: a fingerprint of the token, so asking
    again (a new token) sends again, and the token itself is never copied anywhere."""
    return "confirm:" + hashlib.sha256(b"dedupe:" + token_hash.encode()).hexdigest()[:40]


def _signature(secret: str, purpose: str, object_id: int) -> str:
    digest = hmac.new(secret.encode(), f"{purpose}:{object_id}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode()[:32]


def sign(secret: str, purpose: str, object_id: int) -> str:
    """`<id>.<signature>`, valid only for `purpose` (e.g. unsubscribe) and this id."""
    return f"{object_id}.{_signature(secret, purpose, object_id)}"


def verify(secret: str, purpose: str, token: str) -> int | None:
    """The id a token was signed for, or None for a malformed, forged or misdirected token."""
    match = _SIGNED.match(token)
    if match is None:
        return None
    object_id = int(match.group(1))
    if not hmac.compare_digest(_signature(secret, purpose, object_id), match.group(2)):
        return None
    return object_id


def keyed_email_hash(secret: str, email_key: str) -> str:
    """HMAC of a normalised address (AUD-8): a plain hash can be reversed by guessing."""
    return hmac.new(secret.encode(), b"email:" + email_key.encode(), hashlib.sha256).hexdigest()
