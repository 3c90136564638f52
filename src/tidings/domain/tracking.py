"""Open and click tracking's modes and tokens (ENG-1, ENG-2): pure, no clock, no I/O.

A tracked URL is `<public_url>/c/<link token>/<message token>` (a click) or
`<public_url>/o/<link token>/<message token>` (the open pixel). The link token names a stored
campaign link, (campaign, segment, number), and is the same in every message of a segment: it
is signed once, at render time. The message token is the one per-recipient part, substituted
like every other value; it carries when the message was handed over, a random per-message value
(what makes unique counts unique, stored nowhere beside the recipient) and, only for a consented
subscriber of a `per_person` newsletter, the recipient row. Neither ever carries a URL, so a
forged or altered token cannot redirect anywhere (no open redirect).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

CLICK_PATH = "/c/"
OPEN_PATH = "/o/"
# The longest token either part may be: anything longer is refused before any work.
MAX_TOKEN_LENGTH = 160
PIXEL_NUMBER = 0  # a segment's link number 0 is its open pixel


class TrackingMode(StrEnum):
    """Per newsletter (ENG-1)."""

    OFF = "off"
    AGGREGATE = "aggregate"
    PER_PERSON = "per_person"


TRACKING_MODES = tuple(mode.value for mode in TrackingMode)


class HitKind(StrEnum):
    OPEN = "open"
    CLICK = "click"


class Verdict(StrEnum):
    HUMAN = "human"
    MACHINE = "machine"


@dataclass(frozen=True, slots=True)
class LinkRef:
    """What a link token names: a stored campaign link."""

    campaign_id: int
    segment: str
    number: int


@dataclass(frozen=True, slots=True)
class MessageRef:
    """What a message token carries. `recipient_id` only for a consented per_person message."""

    sent_at: datetime
    message_key: str
    recipient_id: int | None = None


_LINK = re.compile(r"([0-9]{1,19})\.([a-z0-9][a-z0-9_-]{0,63})\.([0-9]{1,6})\.([A-Za-z0-9_-]{16})")
_MESSAGE = re.compile(
    r"([ap])\.([0-9]{1,12})\.([A-Za-z0-9_-]{16})(?:\.([0-9]{1,19}))?\.([A-Za-z0-9_-]{16})"
)


class TrackingSigner:
    """Signs and verifies both token parts with one key (derived from the site secret). The
    HMAC key schedule is done once; a message token costs one HMAC per message."""

    def __init__(self, secret: str) -> None:
        key = hashlib.sha256(b"tidings-tracking:" + secret.encode()).digest()
        self._mac = hmac.new(key, digestmod=hashlib.sha256)

    def _sign(self, message: str) -> str:
        mac = self._mac.copy()
        mac.update(message.encode())
        return base64.urlsafe_b64encode(mac.digest()[:12]).decode()

    def link_token(self, campaign_id: int, segment: str, number: int) -> str:
        signature = self._sign(f"link:{campaign_id}:{segment}:{number}")
        return f"{campaign_id}.{segment}.{number}.{signature}"

    def message_token(
        self, campaign_id: int, sent_at: datetime, recipient_id: int | None = None
    ) -> str:
        """A fresh token for one message: a new random value every call. With `recipient_id`
        (a consented per_person subscriber's recipient row) the hits name that person."""
        sent = int(sent_at.timestamp())
        key = secrets.token_urlsafe(12)  # 16 characters, 96 bits
        person = "" if recipient_id is None else str(recipient_id)
        signature = self._sign(f"message:{campaign_id}:{sent}:{key}:{person}")
        if recipient_id is None:
            return f"a.{sent}.{key}.{signature}"
        return f"p.{sent}.{key}.{recipient_id}.{signature}"

    def read_link(self, token: str) -> LinkRef | None:
        """The link a token names when its signature verifies, else None."""
        if len(token) > MAX_TOKEN_LENGTH:
            return None
        match = _LINK.fullmatch(token)
        if match is None:
            return None
        campaign_id, segment, number = int(match[1]), match[2], int(match[3])
        expected = self._sign(f"link:{campaign_id}:{segment}:{number}")
        if not hmac.compare_digest(expected, match[4]):
            return None
        return LinkRef(campaign_id, segment, number)

    def read_message(self, campaign_id: int, token: str) -> MessageRef | None:
        """What a message token of `campaign_id` carries when its signature verifies."""
        if len(token) > MAX_TOKEN_LENGTH:
            return None
        match = _MESSAGE.fullmatch(token)
        if match is None or (match[1] == "p") != (match[4] is not None):
            return None
        sent, key, person = int(match[2]), match[3], match[4] or ""
        expected = self._sign(f"message:{campaign_id}:{sent}:{key}:{person}")
        if not hmac.compare_digest(expected, match[5]):
            return None
        return MessageRef(
            sent_at=datetime.fromtimestamp(sent, UTC),
            message_key=key,
            recipient_id=int(person) if person else None,
        )


def tracked_url(base_url: str, kind: HitKind, link_token: str, message_token: str) -> str:
    """The URL a message carries for one link (or the pixel)."""
    path = CLICK_PATH if kind is HitKind.CLICK else OPEN_PATH
    return f"{base_url.rstrip('/')}{path}{link_token}/{message_token}"
