"""Merge tags and the slots they become: how per-recipient values get into a rendered segment.

Authors write `{{ name | fallback: "reader" }}`. We parse that small grammar ourselves and
never hand content to Jinja: content is data, and a template engine would turn `{{ … }}` in
a newsletter into code run on our server. Each tag is replaced by an opaque token
(`tds<nonce><index>z`, letters and digits only, so Markdown, the HTML sanitiser, Jinja's
escaping and the CSS inliner all pass it through untouched). After the one template render
per segment the tokens mark where each recipient's values go. The nonce is random per
rendering, so an author cannot forge a token by typing one.
"""

from __future__ import annotations

import html
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tidings.domain.email_headers import check_address, check_atom, clean_display_name
from tidings.domain.errors import InvalidInput

UNSUBSCRIBE_PATH = "/unsubscribe/"
PREFERENCES_PATH = "/preferences/"
MERGE_FIELDS = (
    "name",
    "first_name",
    "email",
    "unsubscribe_url",
    "preferences_url",
    "subscriber_id",
    "recipient_id",
)
_MERGE_TAG = re.compile(r"\{\{(.*?)\}\}")
_TAG_BODY = re.compile(
    r"\s*(?P<field>[A-Za-z_][A-Za-z0-9_]*)(?:\.(?P<key>[A-Za-z0-9_-]{1,64}))?\s*"
    r"(?:\|\s*fallback\s*:\s*(?:\"(?P<dq>[^\"]*)\"|'(?P<sq>[^']*)'))?\s*"
)
NAME_FIELDS = frozenset({"name", "first_name"})
# `{{ attribs.KEY }}`: the subscriber's custom field KEY (AUD-12), which takes a fallback too.
ATTRIBUTES_FIELD = "attribs"
FALLBACK_FIELDS = NAME_FIELDS | {ATTRIBUTES_FIELD}
MAX_ATTRIBUTE_TEXT = 500
# Values that may go anywhere, URLs included, because their alphabet is checked per recipient.
URL_SAFE_FIELDS = frozenset(
    {"unsubscribe_token", "preferences_token", "subscriber_id", "recipient_id", "tracking_token"}
)
# The four always present, then the tracking token when the newsletter tracks (ENG-2).
_URL_SAFE_VALUES = re.compile(
    r"[A-Za-z0-9._-]{1,128}(?: [A-Za-z0-9._-]{1,128}){3}(?: [A-Za-z0-9._-]{1,128})?"
)
_URL_ATTRIBUTE = re.compile(r"\b(?:href|src)\s*=\s*\"([^\"]*)\"", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Slot:
    """One per-recipient value: the recipient field, the attribute's name for `attribs`, and
    for names and attributes the fallback text."""

    field: str
    fallback: str = ""
    key: str = ""


class RecipientValues(NamedTuple):
    """What personalises one message. Tokens and ids must be URL-safe (letters, digits, . - _).
    Built once per recipient on the send path, hence a NamedTuple (a quarter of a frozen
    dataclass's construction cost)."""

    address: str
    name: str | None
    unsubscribe_token: str
    preferences_token: str
    subscriber_id: str
    recipient_id: str
    attributes: Mapping[str, Any] | None = None
    # The per-message part of tracked links and the pixel (ENG-2); "" when not tracked.
    tracking_token: str = ""


SAMPLE_RECIPIENT = RecipientValues(
    address="reader@example.com",
    name="Sam Reader",
    unsubscribe_token="sample-unsubscribe-token",  # noqa: S106 - a placeholder, not a secret
    preferences_token="sample-preferences-token",  # noqa: S106 - a placeholder, not a secret
    subscriber_id="1",
    recipient_id="1",
)


def check_recipient(recipient: RecipientValues) -> None:
    """Refuse values that could break out of a header or a URL. It runs once per message, so
    the URL-safe values are matched in one pass (joined by a space, which none may hold);
    only a failure looks at them one by one, to name the field."""
    check_address("address", recipient.address)
    tracking = recipient.tracking_token
    joined = (
        f"{recipient.unsubscribe_token} {recipient.preferences_token} "
        f"{recipient.subscriber_id} {recipient.recipient_id}" + (f" {tracking}" if tracking else "")
    )
    if _URL_SAFE_VALUES.fullmatch(joined) is None:
        for name in ("unsubscribe_token", "preferences_token", "subscriber_id", "recipient_id"):
            check_atom(name, getattr(recipient, name))
        if tracking:
            check_atom("tracking_token", tracking)


def resolve(slot: Slot, recipient: RecipientValues, clean_name: str | None) -> str:
    """The text a slot stands for, unescaped. `clean_name` is `clean_display_name(name)`."""
    match slot.field:
        case "name":
            return clean_name or slot.fallback
        case "first_name":
            return clean_name.split(" ", 1)[0] if clean_name else slot.fallback
        case "email":
            return recipient.address
        case "unsubscribe_token":
            return recipient.unsubscribe_token
        case "preferences_token":
            return recipient.preferences_token
        case "subscriber_id":
            return recipient.subscriber_id
        case "recipient_id":
            return recipient.recipient_id
        case "tracking_token":
            return recipient.tracking_token
        case "attribs":
            return attribute_text(recipient.attributes, slot)
    raise AssertionError(f"unknown slot field {slot.field}")  # pragma: no cover


def attribute_text(attributes: Mapping[str, Any] | None, slot: Slot) -> str:
    """A custom field as the reader sees it: strings and numbers as text on one line, at most
    MAX_ATTRIBUTE_TEXT characters; missing, empty or any other kind of value is the fallback."""
    value = attributes.get(slot.key) if attributes else None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return slot.fallback
    text = " ".join(str(value).split())[:MAX_ATTRIBUTE_TEXT]
    return text or slot.fallback


@dataclass
class SlotTable:
    """The slots of one segment rendering and the tokens that stand for them."""

    base_url: str
    nonce: str = field(default_factory=lambda: secrets.token_hex(5))
    slots: list[Slot] = field(default_factory=list)
    _index: dict[Slot, int] = field(default_factory=dict)

    @property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(rf"tds{self.nonce}(\d{{3,}})z")

    @property
    def uses_attributes(self) -> bool:
        """Whether a slot shows a custom field: if none does, a send need not read them."""
        return any(slot.field == ATTRIBUTES_FIELD for slot in self.slots)

    def token(self, slot: Slot) -> str:
        index = self._index.get(slot)
        if index is None:
            index = self._index[slot] = len(self.slots)
            self.slots.append(slot)
        return f"tds{self.nonce}{index:03d}z"

    @property
    def unsubscribe_url(self) -> str:
        return self.base_url + UNSUBSCRIBE_PATH + self.token(Slot("unsubscribe_token"))

    @property
    def preferences_url(self) -> str:
        return self.base_url + PREFERENCES_PATH + self.token(Slot("preferences_token"))

    def expand_merge_tags(self, text: str, *, field: str = "body") -> str:
        """Replace every `{{ … }}` with its token; anything but a known merge tag is refused."""
        return _MERGE_TAG.sub(lambda match: self._expand(match[1], field), text)

    def _expand(self, tag: str, field: str) -> str:
        parsed = _TAG_BODY.fullmatch(tag)
        known = parsed is not None and (
            parsed["field"] in MERGE_FIELDS
            if parsed["key"] is None
            else parsed["field"] == ATTRIBUTES_FIELD
        )
        if parsed is None or not known:
            raise InvalidInput(
                f"'{{{{{tag}}}}}' is not a merge tag; use one of "
                + ", ".join(f"{{{{ {name} }}}}" for name in MERGE_FIELDS)
                + " or {{ attribs.KEY }}"
                + ' (names and attribs take | fallback: "text")',
                field=field,
            )
        name = parsed["field"]
        if name == "unsubscribe_url":
            return self.unsubscribe_url
        if name == "preferences_url":
            return self.preferences_url
        fallback = parsed["dq"] if parsed["dq"] is not None else (parsed["sq"] or "")
        if name not in FALLBACK_FIELDS:
            fallback = ""
        return self.token(Slot(name, " ".join(fallback.split()), parsed["key"] or ""))

    def check_url_context(self, fragment: str, *, field: str = "body") -> None:
        """Refuse a name or address inside a link or image URL: subscriber-typed text would
        then choose where a link points (`javascript:…`, a look-alike domain)."""
        pattern = self.pattern
        for attribute in _URL_ATTRIBUTE.finditer(fragment):
            for token in pattern.finditer(attribute[1]):
                slot = self.slots[int(token[1])]
                if slot.field not in URL_SAFE_FIELDS:
                    raise InvalidInput(
                        f"{{{{ {slot.field} }}}} cannot be used inside a link or image URL",
                        field=field,
                    )

    def substitute(self, text: str, recipient: RecipientValues, *, escape: bool) -> str:
        """Fill every token in `text` (previews, tests); sending uses the MIME skeleton."""
        clean_name = clean_display_name(recipient.name)

        def value(match: re.Match[str]) -> str:
            resolved = resolve(self.slots[int(match[1])], recipient, clean_name)
            return html.escape(resolved) if escape else resolved

        return self.pattern.sub(value, text)
