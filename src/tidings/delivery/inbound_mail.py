"""Reading mail that comes back (PRV-6): bounces, complaints and unsubscribe requests, bytes in
and a typed report out; it knows no tables.

- RFC 5965 ARF complaint reports (`multipart/report; report-type=feedback-report`): the
  complained-about recipient from `Original-Rcpt-To` or the returned message's `To`.
- Bounces: RFC 3464 DSNs and the many non-standard formats MTAs still send, detected by
  `flufl.bounce` (GNU Mailman's detectors), which tells permanent from temporary failures; a
  DSN's `Status` and `Diagnostic-Code` are read for the code and the diagnostic.
- Mail to the `List-Unsubscribe` mailto address: its subject is `unsubscribe-<token>`.

The original message's Message-ID, when the report returns its headers, ties the report to a
campaign recipient. Anything else is `unknown`, with the reason, for the operator.
"""

from __future__ import annotations

import email
import email.message
import re
from dataclasses import dataclass, field
from email.utils import getaddresses
from typing import Literal

from tidings.domain import tokens

MAX_DIAGNOSTIC = 1000
_UNSUBSCRIBE = re.compile(f"unsubscribe-({tokens.SIGNED_TOKEN_PATTERN})")
_STATUS = re.compile(r"\b([245]\.[0-9]{1,3}\.[0-9]{1,3})\b")
ReportKind = Literal["bounce", "complaint", "unsubscribe", "unknown"]
# RFC 3463 class-5 details that are no evidence the address is dead: mailbox full (X.2.2),
# delivery time expired (X.4.7).
_SOFT_DETAILS = frozenset({"2.2", "4.7"})
# How MTAs say they gave up after retrying (Exim, Postfix, Sendmail, qmail, Exchange).
_ABANDONED = re.compile(
    r"retry time(?:out)? (?:not reached|exceeded)|message (?:has )?expired|"
    r"delivery temporarily suspended|too long (?:in|on) (?:the )?queue|"
    r"could not be delivered (?:for|within) \d+ (?:hours|days)|"
    r"(?:gave|giving) up after|undeliverable for \d+ (?:hours|days)",
    re.IGNORECASE,
)
_EXPLANATION_BYTES = 16_384


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed recipient of a bounce (address None: only the VERP tag knows whom)."""

    address: str | None
    permanent: bool
    code: str | None = None
    diagnostic: str | None = None


@dataclass(frozen=True, slots=True)
class MailReport:
    kind: ReportKind
    report_id: str  # the report's own Message-ID (or a digest): the dedupe key
    failures: list[Failure] = field(default_factory=list)
    complainant: str | None = None  # complaints: the recipient who complained
    original_message_id: str | None = None
    # The envelope sender of the message the report is about (a complaint's
    # Original-Mail-From, or the Return-Path of the message it quotes): a VERP address.
    original_return_path: str | None = None
    unsubscribe_token: str | None = None
    reason: str = ""  # unknown: why


# Where a mailbox keeps the envelope recipient (lost once mail is stored), most precise first.
_RECIPIENT_HEADERS = ("Delivered-To", "X-Original-To", "Envelope-To", "To", "Cc")


def stored_recipients(data: bytes) -> list[str]:
    """The addresses a message taken from a mailbox was delivered to, as far as its headers
    tell (the envelope recipient of SMTP is not kept in a mailbox)."""
    headers = email.message_from_bytes(data.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0])
    found: list[str] = []
    for name in _RECIPIENT_HEADERS:
        values = [str(value) for value in headers.get_all(name, [])]
        for _, address in getaddresses(values):
            if address and address.lower() not in (known.lower() for known in found):
                found.append(address)
    return found


def read_report(data: bytes, *, report_id: str, to_unsubscribe: bool) -> MailReport:
    """What the message `data` reports. `to_unsubscribe`: it was sent to the List-Unsubscribe
    mailto address. Never raises on malformed input: that is `unknown`."""
    try:
        message = email.message_from_bytes(data)
    except Exception as exc:  # the parser is lenient; anything left is unreadable mail
        return MailReport("unknown", report_id, reason=f"unreadable ({type(exc).__name__})")
    report_id = _clean_id(message.get("Message-ID")) or report_id
    if to_unsubscribe:
        found = _UNSUBSCRIBE.search(str(message.get("Subject", "")))
        if found is None:
            return MailReport("unknown", report_id, reason="no unsubscribe-TOKEN in the subject")
        return MailReport("unsubscribe", report_id, unsubscribe_token=found.group(1))
    feedback = _part(message, "message/feedback-report")
    if feedback is not None:
        return _complaint(message, feedback, report_id)
    try:
        from flufl.bounce import all_failures  # loaded by `tidings inbound` only

        temporary, permanent = all_failures(message)
    except Exception as exc:  # a detector choking on odd mail must not lose the message
        return MailReport(
            "unknown", report_id, reason=f"bounce detectors failed ({type(exc).__name__})"
        )
    if not temporary and not permanent:
        return MailReport("unknown", report_id, reason="neither a bounce nor a complaint")
    codes = _dsn_fields(message)
    abandoned = _ABANDONED.search(_first_text(message)) is not None
    failures = [
        _failure(address, is_permanent, *codes.get(address.lower(), (None, None)), abandoned)
        for is_permanent, found in ((True, permanent), (False, temporary - permanent))
        for address in sorted(_text(item) for item in found)
    ]
    failures.sort(key=lambda failure: not failure.permanent)  # the permanent ones first
    returned = _returned(_part(message, "message/rfc822") or _part(message, "text/rfc822-headers"))
    return MailReport(
        "bounce",
        report_id,
        failures=failures,
        original_message_id=_clean_id(returned.get("Message-ID")) if returned else None,
        original_return_path=_address(returned.get("Return-Path")) if returned else None,
    )


def _failure(
    address: str,
    detected_permanent: bool,
    code: str | None,
    diagnostic: str | None,
    abandoned: bool,
) -> Failure:
    """One failed address, permanent only when the failure says the address is dead.

    RFC 3463 decides where the report gives a status code: class 4 is temporary whatever the
    DSN's Action says (Postfix reports mail it gave up on after its retries as `failed` with
    the last temporary status); two class-5 codes are not evidence of a dead address and are
    soft: X.2.2 (mailbox full, which clears when its owner makes room) and X.4.7 (delivery
    time expired: given up after retries). Without a code, flufl.bounce's detectors decide,
    except that a report saying delivery was abandoned after retries is soft."""
    if code is not None:
        detail = code.partition(".")[2]
        permanent = code.startswith("5.") and detail not in _SOFT_DETAILS
    else:
        permanent = detected_permanent and not abandoned
    return Failure(address, permanent, code, diagnostic)


def _complaint(
    message: email.message.Message, feedback: email.message.Message, report_id: str
) -> MailReport:
    fields = _first_block(feedback)
    original = _part(message, "message/rfc822") or _part(message, "text/rfc822-headers")
    returned = _returned(original)
    complainant = _address(fields.get("Original-Rcpt-To")) or (
        _address(returned.get("To")) if returned is not None else None
    )
    return_path = _address(fields.get("Original-Mail-From")) or (
        _address(returned.get("Return-Path")) if returned is not None else None
    )
    return MailReport(
        "complaint",
        report_id,
        complainant=complainant,
        original_message_id=_clean_id(returned.get("Message-ID")) if returned else None,
        original_return_path=return_path,
    )


def _part(message: email.message.Message, content_type: str) -> email.message.Message | None:
    return next((p for p in message.walk() if p.get_content_type() == content_type), None)


def _first_block(part: email.message.Message) -> email.message.Message:
    payload = part.get_payload()
    if isinstance(payload, list) and payload:
        first = payload[0]
        if isinstance(first, email.message.Message):
            return first
    return email.message_from_string(str(payload or ""))


def _returned(part: email.message.Message | None) -> email.message.Message | None:
    """The headers of the returned original message (a message/rfc822 or rfc822-headers)."""
    if part is None:
        return None
    if part.get_content_type() == "message/rfc822":
        return _first_block(part)
    payload = part.get_payload(decode=True)
    text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    return email.message_from_string(text)


def _first_text(message: email.message.Message) -> str:
    """The human-readable explanation of a bounce (its first text/plain part), capped."""
    part = _part(message, "text/plain")
    payload = part.get_payload(decode=True) if part is not None else None
    return (
        payload[:_EXPLANATION_BYTES].decode("utf-8", "replace")
        if isinstance(payload, bytes)
        else ""
    )


def _dsn_fields(message: email.message.Message) -> dict[str, tuple[str | None, str | None]]:
    """Per failed address (lower-cased), the DSN's status code and diagnostic, if a DSN."""
    part = _part(message, "message/delivery-status")
    payload = part.get_payload() if part is not None else None
    found: dict[str, tuple[str | None, str | None]] = {}
    for block in payload if isinstance(payload, list) else []:
        if not isinstance(block, email.message.Message):
            continue
        address = _address(block.get("Final-Recipient") or block.get("Original-Recipient"))
        if address is None:
            continue
        status = _STATUS.search(str(block.get("Status", "")))
        diagnostic = str(block.get("Diagnostic-Code", "")).partition(";")[2].strip()
        found[address.lower()] = (
            status.group(1) if status else None,
            diagnostic[:MAX_DIAGNOSTIC] or None,
        )
    return found


def _address(value: object) -> str | None:
    """The address in an `rfc822; a@b` DSN field or a header."""
    if not value:
        return None
    text = str(value).partition(";")[2] if ";" in str(value) else str(value)
    pairs = getaddresses([text])
    address = pairs[0][1].strip() if pairs else ""
    return address if "@" in address else None


def _clean_id(value: object) -> str | None:
    text = str(value or "").strip().removeprefix("<").removesuffix(">")
    return text[:255] or None


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
