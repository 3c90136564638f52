"""Reading a captured message (PRV-3) as a person does: its headers, its text and HTML parts,
and every link in it, so the link a confirmation email carries is one command away."""

from __future__ import annotations

import re
from dataclasses import dataclass
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default as default_policy
from html.parser import HTMLParser

SHOWN_HEADERS = ("From", "To", "Reply-To", "Subject", "Date", "Message-ID")
# A URL in plain text ends at whitespace or a closing bracket/quote; a trailing full stop or
# comma belongs to the sentence, not the link.
_TEXT_URL = re.compile(r"(?:https?|mailto):[^\s<>()\"'\[\]]+")
_HEADER_URL = re.compile(r"<((?:https?|mailto):[^>]+)>")


@dataclass(frozen=True, slots=True)
class ReadableMessage:
    headers: tuple[tuple[str, str], ...]
    text: str | None
    html: str | None
    links: tuple[str, ...]  # body links first, in order, then List-Unsubscribe targets; no repeats


class _Hrefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.extend(value for name, value in attrs if name == "href" and value)


def read_message(raw: bytes) -> ReadableMessage:
    """The parts of `raw` (RFC 5322) a reader looks at; never raises on odd mail."""
    message = message_from_bytes(raw, policy=default_policy)
    assert isinstance(message, EmailMessage)
    headers = tuple((name, str(message[name])) for name in SHOWN_HEADERS if message[name])
    text = _part(message, "plain")
    html = _part(message, "html")
    links: list[str] = []
    if html is not None:
        parser = _Hrefs()
        parser.feed(html)
        links.extend(parser.hrefs)
    if text is not None:
        links.extend(url.rstrip(".,;:!?") for url in _TEXT_URL.findall(text))
    links.extend(_HEADER_URL.findall(str(message.get("List-Unsubscribe", ""))))
    return ReadableMessage(headers, text, html, tuple(dict.fromkeys(links)))


def _part(message: EmailMessage, subtype: str) -> str | None:
    part = message.get_body(preferencelist=(subtype,))
    if part is None or part.get_content_subtype() != subtype:
        return None
    try:
        content = part.get_content()
    except (LookupError, ValueError):  # an unknown charset or a broken encoding
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    return str(content)
