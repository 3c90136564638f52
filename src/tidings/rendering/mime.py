"""The MIME message of one segment, built once and personalised as bytes (CMP-3, CMP-4).

The standard library builds the segment's message (From, Subject with RFC 2047, the
multipart/alternative structure and boundaries) once. Its serialised bytes are cut at every
slot; a recipient's message is the per-recipient header lines (To, Date, Message-ID,
List-Unsubscribe) plus the skeleton with the recipient's values encoded for the part they
land in. No `EmailMessage` and no template render per recipient: that is what makes the
send loop fast (see `tidings/bench/render.py`).
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from email.generator import BytesGenerator
from email.headerregistry import Address
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime

from tidings.domain.email_headers import (
    check_address,
    check_atom,
    check_header_values,
    check_hostname,
    clean_display_name,
    feedback_id,
    list_id,
    list_unsubscribe,
    mailbox_header,
    message_id,
)
from tidings.domain.errors import InvalidInput
from tidings.rendering.qp import encode_value, encode_with_slots
from tidings.rendering.slots import (
    UNSUBSCRIBE_PATH,
    RecipientValues,
    SlotTable,
    check_recipient,
    resolve,
)


@dataclass(frozen=True, slots=True)
class Sender:
    """Who the campaign is from. `unsubscribe_mailbox`, when set, is offered in
    `List-Unsubscribe` as a `mailto:` beside the https one-click URL."""

    name: str
    address: str
    sending_domain: str
    reply_to: str | None = None
    unsubscribe_mailbox: str | None = None

    def __post_init__(self) -> None:
        check_header_values({"sender_name": self.name, "reply_to": self.reply_to})
        check_address("sender_address", self.address)
        check_hostname("sending_domain", self.sending_domain)
        if self.reply_to is not None:
            check_address("reply_to", self.reply_to)
        if self.unsubscribe_mailbox is not None:
            check_address("unsubscribe_mailbox", self.unsubscribe_mailbox)

    @property
    def unsubscribe_address(self) -> str | None:
        return self.unsubscribe_mailbox


@dataclass(frozen=True, slots=True)
class ListInfo:
    """The campaign and newsletter a message belongs to: List-Id, Feedback-ID, Message-ID.
    `archive_url` is the issue's public page when the newsletter's archive is on (API-4)."""

    campaign_id: str
    newsletter_slug: str
    newsletter_name: str
    archive_url: str | None = None

    def __post_init__(self) -> None:
        check_atom("campaign_id", self.campaign_id)
        check_atom("newsletter_slug", self.newsletter_slug)
        check_header_values({"newsletter_name": self.newsletter_name})
        if self.archive_url is not None and not _ARCHIVE_URL.fullmatch(self.archive_url):
            raise InvalidInput("archive_url must be an http(s) URL", field="archive_url")


_ARCHIVE_URL = re.compile(r"https?://[^\s\"'<>]+")

# How a value is encoded for each part: HTML-escaped there, verbatim in the text part.
_ENCODERS: dict[str, Callable[[str], bytes]] = {
    "text": lambda value: encode_value(value.encode("utf-8")),
    "html": lambda value: encode_value(html.escape(value).encode("utf-8")),
}


class MessageSkeleton:
    """One segment's serialised message, cut into constant parts and recipient slots."""

    def __init__(
        self,
        *,
        html_body: str,
        text_body: str,
        subject: str,
        sender: Sender,
        list_info: ListInfo,
        slots: SlotTable,
        now: datetime,
    ) -> None:
        self._sender = sender
        self._list_info = list_info
        self._unsubscribe_prefix = slots.base_url + UNSUBSCRIBE_PATH
        html_parts, html_slots = encode_with_slots(html_body, slots.pattern)
        text_parts, text_slots = encode_with_slots(text_body, slots.pattern)
        head, between, tail = _serialise_segment(subject, sender, list_info, slots.nonce)
        name, slug = list_info.newsletter_name, list_info.newsletter_slug
        list_id_line = f"List-Id: {list_id(name, slug, sender.sending_domain)}\r\n"
        self._parts = [*text_parts[:-1], text_parts[-1] + between + html_parts[0], *html_parts[1:]]
        self._parts[0] = list_id_line.encode("ascii") + head + self._parts[0]
        self._parts[-1] += tail
        # Each distinct (slot, part) pair is resolved and encoded once per recipient.
        keys: list[tuple[int, str]] = []
        positions: list[int] = []
        for context, indices in (("text", text_slots), ("html", html_slots)):
            for index in indices:
                key = (index, context)
                if key not in keys:
                    keys.append(key)
                positions.append(keys.index(key))
        self._keys = [(slots.slots[index], _ENCODERS[context]) for index, context in keys]
        self._positions = positions
        self._date = (0, "")
        self._default_now = now

    def personalise(self, recipient: RecipientValues, *, now: datetime | None = None) -> bytes:
        """The recipient's message as SMTP-ready bytes (CRLF line ends, 7-bit)."""
        check_recipient(recipient)
        clean_name = clean_display_name(recipient.name)
        address = recipient.address
        token = recipient.unsubscribe_token
        unsubscribe = list_unsubscribe(
            self._unsubscribe_prefix + token, self._sender.unsubscribe_address, token
        )
        headers = (
            f"To: {mailbox_header(address, clean_name)}\r\n"
            f"Date: {self._date_header(now or self._default_now)}\r\n"
            f"Message-ID: {self.message_id_for(address)}\r\n"
            f"List-Unsubscribe: {unsubscribe}\r\n"
        )
        values = [encode(resolve(slot, recipient, clean_name)) for slot, encode in self._keys]
        chunks = [headers.encode("ascii")]  # every header value above is ASCII by construction
        parts = self._parts
        for number, key in enumerate(self._positions):
            chunks.append(parts[number])
            chunks.append(values[key])
        chunks.append(parts[-1])
        return b"".join(chunks)

    def message_id_for(self, address: str) -> str:
        return message_id(self._list_info.campaign_id, address, self._sender.sending_domain)

    def _date_header(self, now: datetime) -> str:
        # Formatting a date costs more than the rest of the headers; cache it per second.
        second = int(now.timestamp())
        if self._date[0] != second:
            self._date = (second, format_datetime(now))
        return self._date[1]


def _serialise_segment(
    subject: str, sender: Sender, list_info: ListInfo, nonce: str
) -> tuple[bytes, bytes, bytes]:
    """The segment's message from the standard library, split around the two bodies."""
    message = EmailMessage(policy=SMTP)
    message["From"] = Address(display_name=sender.name, addr_spec=sender.address)
    if sender.reply_to:
        message["Reply-To"] = sender.reply_to
    message["Subject"] = subject
    message["MIME-Version"] = "1.0"
    message["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    message["Feedback-ID"] = feedback_id(
        list_info.campaign_id, list_info.newsletter_slug, sender.sending_domain
    )
    message["Content-Type"] = "multipart/alternative"
    markers = {}
    for subtype in ("plain", "html"):
        part = EmailMessage(policy=SMTP)
        part["Content-Type"] = f'text/{subtype}; charset="utf-8"'
        part["Content-Transfer-Encoding"] = "quoted-printable"
        marker = f"tdsbody{nonce}{subtype}"
        part.set_payload(marker)
        markers[subtype] = marker.encode("ascii")
        message.attach(part)
    buffer = io.BytesIO()
    BytesGenerator(buffer, policy=SMTP).flatten(message)
    serialised = buffer.getvalue()
    # Each body ends with its own CRLF; the CRLF after a marker belongs to the boundary.
    head, rest = serialised.split(markers["plain"], 1)
    between, tail = rest.split(markers["html"], 1)
    return head, between, tail
