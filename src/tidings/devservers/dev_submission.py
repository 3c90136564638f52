"""What a send request to the dev provider says, checked the way Mailgun checks it.

Mailgun's form (`messages`): `from`, one or more `to` (plain addresses, or `Name <address>`
lists), `subject`, `text` and/or `html`, `recipient-variables` (JSON keyed by address), and
prefixed fields: `h:` headers, `v:` custom variables, `o:` options. Its MIME form
(`messages.mime`): `to` and the whole message as a file part named `message`, from which the
sender, subject, headers and bodies are read. What Mailgun would refuse is a `SubmissionError`
whose message goes back in a 400 answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import getaddresses, parsedate_to_datetime

from tidings.delivery.form_data import FilePart, FormError, parse_form, parse_form_parts

MAX_RECIPIENTS = 1000
OPTIMIZE_PERIOD = re.compile(r"^(\d{1,3})h$")


class SubmissionError(Exception):
    """The request is not a valid send; the message is Mailgun-style and goes back as 400."""


@dataclass(frozen=True, slots=True)
class Submission:
    sender: str
    addresses: list[str]
    subject: str
    html: str
    text: str
    headers: dict[str, str]
    options: dict[str, list[str]]
    user_variables: dict[str, str]
    recipient_variables: dict[str, dict[str, str]]


# Mailgun's per-message tracking switches and the values it takes.
_YES_NO = frozenset({"yes", "no", "true", "false"})
TRACKING_OPTIONS = {
    "tracking": _YES_NO,
    "tracking-opens": _YES_NO,
    "tracking-clicks": _YES_NO | {"htmlonly"},
}


def parse_submission(content_type: str, body: bytes) -> Submission:
    """A `messages` request's fields, checked the way Mailgun checks them."""
    try:
        form = _Form.sort(parse_form(content_type, body))
    except FormError as exc:
        raise SubmissionError(str(exc)) from None
    if not form.single.get("from"):
        raise SubmissionError("from parameter is missing")
    form.check()
    if "html" not in form.single and "text" not in form.single:
        raise SubmissionError("need at least one of 'text' or 'html' parameters specified")
    return Submission(
        sender=form.single["from"],
        addresses=form.addresses,
        subject=form.single.get("subject", ""),
        html=form.single.get("html", ""),
        text=form.single.get("text", ""),
        headers=form.headers,
        options=form.options,
        user_variables=form.user_variables,
        recipient_variables=_recipient_variables(form.single.get("recipient-variables")),
    )


def parse_mime_submission(content_type: str, body: bytes) -> Submission:
    """A `messages.mime` request: the recipients from `to`, the rest from the message."""
    try:
        parts = parse_form_parts(content_type, body)
    except FormError as exc:
        raise SubmissionError(str(exc)) from None
    texts = [(name, value) for name, value in parts if isinstance(value, str)]
    files = [(name, value) for name, value in parts if isinstance(value, FilePart)]
    if any(name == "message" for name, _ in texts):
        raise SubmissionError("message parameter must be sent as a file upload")
    if any(name != "message" for name, _ in files) or len(files) > 1:
        raise SubmissionError("the one file part must be the message parameter")
    form = _Form.sort(texts)
    form.check()
    if not files or not files[0][1].data:
        raise SubmissionError("message parameter is missing")
    message = BytesParser(policy=policy.default).parsebytes(files[0][1].data)
    return Submission(
        sender=str(message.get("from", "")),
        addresses=form.addresses,
        subject=str(message.get("subject", "")),
        html=_body(message, "html"),
        text=_body(message, "plain"),
        # h: fields, which Mailgun takes here too, are stored over the message's own headers.
        headers={**{name: str(value) for name, value in message.items()}, **form.headers},
        options=form.options,
        user_variables=form.user_variables,
        recipient_variables={},
    )


@dataclass(slots=True)
class _Form:
    """A send form's fields by kind; `single` holds the last of each unprefixed field."""

    single: dict[str, str] = field(default_factory=dict)
    addresses: list[str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    options: dict[str, list[str]] = field(default_factory=dict)
    user_variables: dict[str, str] = field(default_factory=dict)

    @classmethod
    def sort(cls, fields: Iterable[tuple[str, str]]) -> _Form:
        form = cls()
        for name, value in fields:
            if name == "to":
                form.addresses.extend(_addresses(value))
            elif name.startswith("h:"):
                form.headers[name[2:]] = value
            elif name.startswith("v:"):
                form.user_variables[name[2:]] = value
            elif name.startswith("o:"):
                form.options.setdefault(name[2:], []).append(value)
            else:
                form.single[name] = value
        return form

    def check(self) -> None:
        """Mailgun's checks shared by both endpoints: recipients and options."""
        if not self.addresses:
            raise SubmissionError("to parameter is missing")
        if len(self.addresses) > MAX_RECIPIENTS:
            raise SubmissionError(f"too many recipients: at most {MAX_RECIPIENTS} per request")
        _check_options(self.options)


def _body(message: EmailMessage, subtype: str) -> str:
    """The message's text/`subtype` body, decoded; empty when it has none or it is unreadable."""
    part = message.get_body(preferencelist=(subtype,))
    if part is None or part.get_content_type() != f"text/{subtype}":
        return ""
    try:
        return str(part.get_content())
    except (LookupError, ValueError):  # an unknown charset or a broken transfer encoding
        return ""


def _addresses(value: str) -> list[str]:
    if "<" not in value and "," not in value:  # the common case, kept fast
        return [value.strip()] if value.strip() else []
    return [address for _, address in getaddresses([value]) if address]


def _recipient_variables(raw: str | None) -> dict[str, dict[str, str]]:
    if raw is None:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        raise SubmissionError("recipient-variables parameter is not a valid JSON") from None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise SubmissionError("recipient-variables must map each address to an object")
    return parsed


def _check_options(options: Mapping[str, list[str]]) -> None:
    for name, allowed in TRACKING_OPTIONS.items():
        for value in options.get(name, []):
            if value.lower() not in allowed:
                raise SubmissionError(f"o:{name} must be one of {', '.join(sorted(allowed))}")
    for value in options.get("deliverytime", []):
        try:
            parsedate_to_datetime(value)
        except (TypeError, ValueError):
            raise SubmissionError("o:deliverytime is not an RFC 2822 date") from None
    for value in options.get("deliverytime-optimize-period", []):
        period = OPTIMIZE_PERIOD.match(value)
        if period is None or not 24 <= int(period.group(1)) <= 72:
            raise SubmissionError("o:deliverytime-optimize-period must be 24h to 72h")
