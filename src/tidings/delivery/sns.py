"""Amazon SES events through SNS (PRV-6): an SNS message's signature checked, and SES's Bounce,
Complaint and Delivery notifications read into provider-neutral events. Bytes in, typed
values out; it knows no tables.

SNS signs a canonical string of the message's fields with the key of a certificate it
publishes at `SigningCertURL` (SHA1withRSA for SignatureVersion 1, SHA256withRSA for 2). The
certificate is fetched only over https from a host matching the SNS pattern in full
(`sns.<region>.amazonaws.com`, or `.amazonaws.com.cn`) with a path ending `.pem`, and cached;
a fetch that fails is remembered for a minute, so a flood of messages naming a bad
certificate costs one fetch, not one each. A URL that does not even parse is bad input (4xx),
never an error of ours. A valid signature proves SNS sent the message, not that *your* topic
did: the caller also checks `TopicArn` against its own list.
"""

from __future__ import annotations

import base64
import binascii
import re
import ssl
import time
from collections import OrderedDict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from tidings.delivery import rsa_signature
from tidings.delivery.event_webhooks import MalformedEvent, SignatureRejected, json_loads
from tidings.domain.errors import InvalidInput
from tidings.domain.feedback import EventKind, ReportedEvent

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

SOURCE = "ses"
HASHES = {"1": "sha1", "2": "sha256"}
NOTIFICATION_FIELDS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
CONFIRMATION_FIELDS = (
    "Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type",
)  # fmt: skip
TYPES = ("Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation")
MAX_CERTIFICATE_BYTES = 16_384
CACHED_CERTIFICATES = 16
FAILED_FETCH_SECONDS = 60.0
REMEMBERED_FAILURES = 256
MAX_DIAGNOSTIC = 1000


def string_to_sign(message: dict[str, Any]) -> bytes:
    """The canonical string SNS signs: `Name\\nvalue\\n` for each signed field present."""
    names = NOTIFICATION_FIELDS if message.get("Type") == "Notification" else CONFIRMATION_FIELDS
    return "".join(
        f"{name}\n{message[name]}\n" for name in names if message.get(name) is not None
    ).encode()


def read_message(body: bytes) -> dict[str, Any]:
    """The SNS message (a JSON object, sent as text/plain), or InvalidInput."""
    try:
        message = json_loads(body)
    except ValueError:
        raise InvalidInput("the body is not JSON", field="body") from None
    if not isinstance(message, dict):
        raise InvalidInput("the body is not a JSON object", field="body")
    if message.get("Type") not in TYPES:
        raise InvalidInput(f"Type must be one of {', '.join(TYPES)}", field="Type")
    return message


class SnsCertificates:
    """SNS signing certificates, fetched over https from hosts matching `host_pattern` and
    kept (the few SNS uses are reused for months)."""

    def __init__(
        self,
        *,
        host_pattern: str,
        verify: ssl.SSLContext | bool = True,
        timeout_seconds: float = 10.0,
    ) -> None:
        self._host = re.compile(host_pattern)
        self._client = httpx.AsyncClient(
            timeout=timeout_seconds, verify=verify, follow_redirects=False
        )
        self._keys: OrderedDict[str, RSAPublicKey] = OrderedDict()
        # url -> (monotonic time until which it is not fetched again, why it failed)
        self._failures: OrderedDict[str, tuple[float, str]] = OrderedDict()

    def check_url(self, url: object, *, field: str, certificate: bool = False) -> str:
        """`url` if it is https on an SNS host (with a `.pem` path for a `certificate`);
        SignatureRejected if it is anywhere else, InvalidInput if it is no URL at all."""
        if not isinstance(url, str):
            raise SignatureRejected(f"{field} is missing")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError for a port out of range
            httpx.URL(url)
        except (ValueError, httpx.InvalidURL):
            raise InvalidInput(f"{field} is not a valid URL", field=field) from None
        if (
            parts.scheme != "https"
            or parts.username is not None
            or not self._host.fullmatch(parts.hostname or "")
        ):
            raise SignatureRejected(f"{field} is not an https URL on an SNS host")
        if certificate and (not parts.path.endswith(".pem") or parts.query or parts.fragment):
            raise SignatureRejected(f"{field} is not the URL of a .pem certificate")
        return url

    async def key_for(self, url: str) -> RSAPublicKey:
        if url in self._keys:
            self._keys.move_to_end(url)
            return self._keys[url]
        failed = self._failures.get(url)
        if failed is not None and failed[0] > time.monotonic():
            raise SignatureRejected(failed[1] + " (a moment ago; not fetched again yet)")
        try:
            key = await self._fetched_key(url)
        except SignatureRejected as exc:
            self._failures[url] = (time.monotonic() + FAILED_FETCH_SECONDS, exc.detail)
            self._failures.move_to_end(url)
            if len(self._failures) > REMEMBERED_FAILURES:
                self._failures.popitem(last=False)
            raise
        self._failures.pop(url, None)
        self._keys[url] = key
        if len(self._keys) > CACHED_CERTIFICATES:
            self._keys.popitem(last=False)
        return key

    async def _fetched_key(self, url: str) -> RSAPublicKey:
        try:
            response = await self._client.get(url)
        except httpx.HTTPError as exc:
            raise SignatureRejected(
                f"the signing certificate could not be fetched ({type(exc).__name__})"
            ) from None
        if response.status_code != 200 or len(response.content) > MAX_CERTIFICATE_BYTES:
            raise SignatureRejected("the signing certificate could not be fetched")
        try:
            return rsa_signature.rsa_public_key(response.content)
        except rsa_signature.BadCertificate as exc:
            raise SignatureRejected(f"the signing certificate is unusable: {exc}") from None

    async def verify(self, message: dict[str, Any], *, now: datetime, max_age_seconds: int) -> None:
        """SignatureRejected unless `message` is signed by SNS and recent."""
        hash_name = HASHES.get(str(message.get("SignatureVersion")))
        if hash_name is None:
            raise SignatureRejected("SignatureVersion must be 1 or 2")
        url = self.check_url(
            message.get("SigningCertURL"), field="SigningCertURL", certificate=True
        )
        try:
            signature = base64.b64decode(str(message.get("Signature", "")), validate=True)
        except (binascii.Error, ValueError):
            raise SignatureRejected("the signature is not base64") from None
        key = await self.key_for(url)
        if not rsa_signature.verify(key, signature, string_to_sign(message), hash_name):
            raise SignatureRejected("the signature does not match")
        sent_at = _time(message.get("Timestamp"))
        if sent_at is None or abs((now - sent_at).total_seconds()) > max_age_seconds:
            raise SignatureRejected("the message is too old (or from the future)")

    async def confirm(self, message: dict[str, Any]) -> None:
        """Confirm a subscription by visiting its SubscribeURL (an SNS host, https only)."""
        url = self.check_url(message.get("SubscribeURL"), field="SubscribeURL")
        try:
            response = await self._client.get(url)
        except httpx.HTTPError as exc:
            raise SignatureRejected(
                f"the subscription could not be confirmed ({type(exc).__name__})"
            ) from None
        if response.status_code != 200:
            raise SignatureRejected(f"SNS answered {response.status_code} to the confirmation")

    async def close(self) -> None:
        await self._client.aclose()


def ses_events(message: dict[str, Any]) -> list[ReportedEvent]:
    """SES's Bounce, Complaint and Delivery notification (or event publishing record) in the
    message, one event per recipient; [] for a type tidings does not act on."""
    try:
        notification = json_loads(str(message.get("Message", "")))
    except ValueError:
        raise MalformedEvent("Message is not JSON") from None
    if not isinstance(notification, dict):
        raise MalformedEvent("Message is not a JSON object")
    kind = notification.get("notificationType") or notification.get("eventType")
    mail = notification.get("mail")
    message_id = _original_message_id(mail) if isinstance(mail, dict) else None
    base = str(message.get("MessageId", ""))[:200]
    if kind == "Bounce":
        detail = _object(notification, "bounce")
        permanent = detail.get("bounceType") == "Permanent"
        recipients = detail.get("bouncedRecipients")
        event_kind = EventKind.HARD_BOUNCE if permanent else EventKind.SOFT_BOUNCE
    elif kind == "Complaint":
        detail = _object(notification, "complaint")
        recipients = detail.get("complainedRecipients")
        event_kind = EventKind.COMPLAINT
    elif kind == "Delivery":
        detail = _object(notification, "delivery")
        recipients = [{"emailAddress": r} for r in detail.get("recipients") or []]
        event_kind = EventKind.DELIVERED
    else:
        return []
    if not isinstance(recipients, list) or not recipients:
        raise MalformedEvent(f"the {kind} names no recipients")
    occurred_at = _time(detail.get("timestamp")) or _time(message.get("Timestamp"))
    if occurred_at is None:
        raise MalformedEvent("the notification has no timestamp")
    events = []
    for recipient in recipients:
        address = recipient.get("emailAddress") if isinstance(recipient, dict) else None
        if not isinstance(address, str):
            raise MalformedEvent("a recipient has no emailAddress")
        status = recipient.get("status")
        diagnostic = recipient.get("diagnosticCode")
        events.append(
            ReportedEvent(
                source=SOURCE,
                event_key=f"{base}:{address}"[:255],
                kind=event_kind,
                address=address,
                occurred_at=occurred_at,
                code=status[:32] if isinstance(status, str) else None,
                diagnostic=diagnostic[:MAX_DIAGNOSTIC] if isinstance(diagnostic, str) else None,
                message_id=message_id,
            )
        )
    return events


def _object(notification: dict[str, Any], name: str) -> dict[str, Any]:
    found = notification.get(name)
    if not isinstance(found, dict):
        raise MalformedEvent(f"the notification has no {name} object")
    return found


def _original_message_id(mail: dict[str, Any]) -> str | None:
    """The Message-ID tidings gave the message (SES's own `messageId` is another thing)."""
    for header in mail.get("headers") or []:
        if isinstance(header, dict) and str(header.get("name", "")).lower() == "message-id":
            return str(header.get("value", "")).strip().strip("<>") or None
    common = mail.get("commonHeaders")
    found = common.get("messageId") if isinstance(common, dict) else None
    return found.strip().strip("<>") or None if isinstance(found, str) else None


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
