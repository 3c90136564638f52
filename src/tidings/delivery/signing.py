"""Standard Webhooks signing: `whsec_` secrets and the webhook-id/-timestamp/-signature headers.

Receivers verify with the existing Standard Webhooks (or Svix) libraries, so the signature is
computed by the reference Python library rather than re-derived here. Several secrets sign at
once during a rotation: the header then carries one `v1,` signature per secret, and a receiver
holding either the old or the new secret accepts the message.
"""

from __future__ import annotations

import base64
import binascii
import secrets as random_source
from collections.abc import Sequence
from datetime import UTC, datetime

from standardwebhooks import Webhook

from tidings.domain.errors import InvalidInput

SECRET_PREFIX = "whsec_"  # noqa: S105 -- the format's prefix, not a secret
# The Standard Webhooks specification allows keys of 24 to 64 bytes.
MIN_SECRET_BYTES = 24
MAX_SECRET_BYTES = 64
DEFAULT_SECRET_BYTES = 32


def generate_secret(num_bytes: int = DEFAULT_SECRET_BYTES) -> str:
    """A new random signing secret: `whsec_` and the base64 of `num_bytes` random bytes."""
    if not MIN_SECRET_BYTES <= num_bytes <= MAX_SECRET_BYTES:
        raise ValueError(f"num_bytes must be {MIN_SECRET_BYTES}..{MAX_SECRET_BYTES}")
    key = random_source.token_bytes(num_bytes)
    return SECRET_PREFIX + base64.b64encode(key).decode("ascii")


def decode_secret(secret: str) -> bytes:
    """The key bytes of a `whsec_` secret; InvalidInput if it is not one.

    Stricter than the reference library, which skips characters outside the base64 alphabet
    and so would sign with a different key than the one an admin pasted.
    """
    if not secret.startswith(SECRET_PREFIX):
        raise InvalidInput(f"A webhook secret starts with {SECRET_PREFIX}", field="secret")
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except binascii.Error:
        raise InvalidInput("A webhook secret is base64 after its prefix", field="secret") from None
    if not MIN_SECRET_BYTES <= len(key) <= MAX_SECRET_BYTES:
        raise InvalidInput(
            f"A webhook secret holds {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes", field="secret"
        )
    return key


def sign(msg_id: str, timestamp: datetime | int, body: bytes, secret: str) -> str:
    """One `v1,<base64>` signature of `{msg_id}.{timestamp}.{body}` under `secret`."""
    seconds = _unix_seconds(timestamp)
    # The library replaces (rather than converts) the timezone, so hand it UTC.
    when = datetime.fromtimestamp(seconds, tz=UTC)
    return str(Webhook(decode_secret(secret)).sign(msg_id, when, body.decode("utf-8")))


def sign_headers(
    msg_id: str, timestamp: datetime | int, body: bytes, secrets: Sequence[str]
) -> dict[str, str]:
    """The three Standard Webhooks headers for one attempt, signed with every secret given.

    `msg_id` stays the same across retries of one message (receivers deduplicate on it); the
    timestamp is the attempt's, so a retry is signed afresh. `body` must be UTF-8 (JSON).
    """
    if not secrets:
        raise ValueError("at least one secret is needed to sign")
    signatures = " ".join(sign(msg_id, timestamp, body, secret) for secret in secrets)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(_unix_seconds(timestamp)),
        "webhook-signature": signatures,
    }


def _unix_seconds(timestamp: datetime | int) -> int:
    if isinstance(timestamp, int):
        return timestamp
    if timestamp.tzinfo is None:
        raise ValueError("timestamp must be timezone-aware")
    return int(timestamp.timestamp())
