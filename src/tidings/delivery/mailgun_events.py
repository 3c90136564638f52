"""Mailgun's event webhooks, read and checked (PRV-6): the signature, its age, and the event
in provider-neutral form. Bytes in, typed values out; it knows no tables.

A Mailgun webhook is a JSON object `{"signature": {...}, "event-data": {...}}`. The signature
is the hex HMAC-SHA256, keyed with the webhook signing key, of `timestamp + token`; the
token is random per request, so a request seen once must not be accepted again (the caller
keeps the tokens), and the timestamp must be recent. Events: `delivered`; `failed` with
`severity` `permanent` (a hard bounce) or `temporary` (a soft bounce); `complained`;
`unsubscribed`. Others (`opened`, `clicked`, `accepted`...) are recorded and ignored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tidings.delivery.event_webhooks import MalformedEvent, SignatureRejected, json_loads
from tidings.domain.errors import InvalidInput
from tidings.domain.feedback import EventKind, ReportedEvent

SOURCE = "mailgun"
MAX_DIAGNOSTIC = 1000
MAX_KEY = 255


@dataclass(frozen=True, slots=True)
class SignedBody:
    """A webhook body whose signature checked out: its token and its event data."""

    token: str
    event_data: Any


def sign(signing_key: str, timestamp: str, token: str) -> str:
    """The signature Mailgun puts beside `timestamp` and `token` (the dev provider signs too)."""
    message = (timestamp + token).encode()
    return hmac.new(signing_key.encode(), message, hashlib.sha256).hexdigest()


def signed_body(
    signing_key: str, event_data: dict[str, Any], *, now: datetime, token: str | None = None
) -> bytes:
    """A webhook body as Mailgun sends it, signed with `signing_key` (the dev provider and the
    events benchmark post these)."""
    timestamp = str(int(now.timestamp()))
    token = token or secrets.token_hex(25)
    signature = {
        "timestamp": timestamp,
        "token": token,
        "signature": sign(signing_key, timestamp, token),
    }
    return json.dumps({"signature": signature, "event-data": event_data}).encode()


def event_data(
    event: str,
    recipient: str,
    *,
    event_id: str,
    occurred_at: datetime,
    message_id: str | None = None,
    severity: str | None = None,
    code: int | None = None,
    description: str = "",
) -> dict[str, Any]:
    """The `event-data` of one Mailgun event, in the fields tidings reads."""
    data: dict[str, Any] = {
        "id": event_id,
        "event": event,
        "timestamp": occurred_at.timestamp(),
        "recipient": recipient,
        "message": {"headers": {"message-id": (message_id or "").strip("<>")}},
    }
    if severity is not None:
        data["severity"] = severity
    if code is not None:
        data["delivery-status"] = {"code": code, "message": description, "description": ""}
    return data


def verify(body: bytes, *, signing_key: str, now: datetime, max_age_seconds: int) -> SignedBody:
    """The signed body, or `SignatureRejected` (forged, stale, missing) / `InvalidInput` (not
    a JSON object at all, so there is no signature to check)."""
    try:
        document = json_loads(body)
    except ValueError:
        raise InvalidInput("the body is not JSON", field="body") from None
    if not isinstance(document, dict):
        raise InvalidInput("the body is not a JSON object", field="body")
    signature = document.get("signature")
    if not isinstance(signature, dict):
        raise SignatureRejected("the event carries no signature")
    timestamp, token, given = (signature.get(name) for name in ("timestamp", "token", "signature"))
    if not all(isinstance(value, str) and value for value in (timestamp, token, given)):
        raise SignatureRejected("the signature needs timestamp, token and signature")
    assert isinstance(timestamp, str)
    assert isinstance(token, str)
    assert isinstance(given, str)
    if len(token) > MAX_KEY:
        raise SignatureRejected("the signature token is too long")
    expected = sign(signing_key, timestamp, token)
    if not hmac.compare_digest(expected, given.lower()):
        raise SignatureRejected("the signature does not match")
    try:
        signed_at = float(timestamp)
    except ValueError:
        raise SignatureRejected("the signature timestamp is not a number") from None
    if abs(now.timestamp() - signed_at) > max_age_seconds:
        raise SignatureRejected("the signature is too old (or from the future)")
    return SignedBody(token=token, event_data=document.get("event-data"))


def parse(signed: SignedBody) -> ReportedEvent:
    """The event in provider-neutral form; `MalformedEvent` when it cannot be read."""
    data = signed.event_data
    if not isinstance(data, dict):
        raise MalformedEvent("no event-data object")
    event_id, name, recipient = data.get("id"), data.get("event"), data.get("recipient")
    if not isinstance(event_id, str) or not event_id or len(event_id) > MAX_KEY:
        raise MalformedEvent("event-data.id is missing")
    if not isinstance(name, str):
        raise MalformedEvent("event-data.event is missing")
    stamp = data.get("timestamp")
    if not isinstance(stamp, int | float) or isinstance(stamp, bool):
        raise MalformedEvent("event-data.timestamp is not a number")
    try:
        occurred_at = datetime.fromtimestamp(stamp, UTC)
    except (OverflowError, OSError, ValueError):
        raise MalformedEvent("event-data.timestamp is out of range") from None
    status = data.get("delivery-status")
    status = status if isinstance(status, dict) else {}
    return ReportedEvent(
        source=SOURCE,
        event_key=event_id,
        kind=_kind(name, data.get("severity")),
        address=recipient if isinstance(recipient, str) else None,
        occurred_at=occurred_at,
        code=_code(status.get("code")),
        diagnostic=_diagnostic(status),
        message_id=_message_id(data.get("message")),
        token=signed.token,
    )


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _kind(name: str, severity: object) -> EventKind | None:
    if name == "delivered":
        return EventKind.DELIVERED
    if name == "failed":
        return EventKind.SOFT_BOUNCE if severity == "temporary" else EventKind.HARD_BOUNCE
    if name == "complained":
        return EventKind.COMPLAINT
    if name == "unsubscribed":
        return EventKind.UNSUBSCRIBE
    return None


def _code(code: object) -> str | None:
    if isinstance(code, int) and not isinstance(code, bool):
        return str(code)
    if isinstance(code, str) and code.strip():
        return code.strip()[:32]
    return None


def _diagnostic(status: dict[str, Any]) -> str | None:
    parts = [status.get(name) for name in ("message", "description")]
    text = " ".join(part.strip() for part in parts if isinstance(part, str) and part.strip())
    return text[:MAX_DIAGNOSTIC] or None


def _message_id(message: object) -> str | None:
    headers = message.get("headers") if isinstance(message, dict) else None
    found = headers.get("message-id") if isinstance(headers, dict) else None
    if not isinstance(found, str):
        return None
    return found.strip().removeprefix("<").removesuffix(">") or None
