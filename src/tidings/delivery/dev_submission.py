"""What a send request to the dev provider says, checked the way Mailgun checks it.

Mailgun's form: `from`, one or more `to` (plain addresses, or `Name <address>` lists),
`subject`, `text` and/or `html`, `recipient-variables` (JSON keyed by address), and prefixed
fields: `h:` headers, `v:` custom variables, `o:` options. What Mailgun would refuse is a
`SubmissionError` whose message goes back in a 400 answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import getaddresses, parsedate_to_datetime

from tidings.delivery.form_data import FormError, parse_form

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


def parse_submission(content_type: str, body: bytes) -> Submission:
    """A send request's fields, checked the way Mailgun checks them."""
    try:
        fields = parse_form(content_type, body)
    except FormError as exc:
        raise SubmissionError(str(exc)) from None
    single: dict[str, str] = {}
    addresses: list[str] = []
    headers: dict[str, str] = {}
    options: dict[str, list[str]] = {}
    user_variables: dict[str, str] = {}
    for name, value in fields:
        if name == "to":
            addresses.extend(_addresses(value))
        elif name.startswith("h:"):
            headers[name[2:]] = value
        elif name.startswith("v:"):
            user_variables[name[2:]] = value
        elif name.startswith("o:"):
            options.setdefault(name[2:], []).append(value)
        else:
            single[name] = value
    if not single.get("from"):
        raise SubmissionError("from parameter is missing")
    if not addresses:
        raise SubmissionError("to parameter is missing")
    if len(addresses) > MAX_RECIPIENTS:
        raise SubmissionError(f"too many recipients: at most {MAX_RECIPIENTS} per request")
    if "html" not in single and "text" not in single:
        raise SubmissionError("need at least one of 'text' or 'html' parameters specified")
    _check_options(options)
    return Submission(
        sender=single["from"],
        addresses=addresses,
        subject=single.get("subject", ""),
        html=single.get("html", ""),
        text=single.get("text", ""),
        headers=headers,
        options=options,
        user_variables=user_variables,
        recipient_variables=_recipient_variables(single.get("recipient-variables")),
    )


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
    for value in options.get("deliverytime", []):
        try:
            parsedate_to_datetime(value)
        except (TypeError, ValueError):
            raise SubmissionError("o:deliverytime is not an RFC 2822 date") from None
    for value in options.get("deliverytime-optimize-period", []):
        period = OPTIMIZE_PERIOD.match(value)
        if period is None or not 24 <= int(period.group(1)) <= 72:
            raise SubmissionError("o:deliverytime-optimize-period must be 24h to 72h")
