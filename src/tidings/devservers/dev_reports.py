"""The dev SMTP sink hears back too (PRV-4, PRV-6): for messages it accepts it can mail back
what a real relay and mailbox provider would, to `tidings inbound` — an RFC 3464 DSN for local
parts `bounce-*` (permanent, 5.1.1) and `softbounce-*` (transient, 4.2.2), an RFC 5965 ARF
abuse report for `complain-*` — each to the message's envelope sender (the VERP return path,
so the report names its recipient row). Other recipients hear nothing, as with real mail.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import Counter

import aiosmtplib
import structlog

from tidings.devservers.sink import ReceivedMessage

log = structlog.get_logger("tidings.delivery")
REPORTER = "MAILER-DAEMON@dev-smtp.invalid"


def _head(original: bytes) -> bytes:
    return original.split(b"\r\n\r\n", 1)[0]


def dsn(original: bytes, *, to: str, failed: str, status: str, diagnostic: str) -> bytes:
    """An RFC 3464 delivery status notification for `original`, as Postfix sends one."""
    action = "failed" if status.startswith("5") else "delayed"
    return (
        (
            f"From: {REPORTER}\r\nTo: {to}\r\n"
            "Subject: Undelivered Mail Returned to Sender\r\n"
            f"Message-ID: <dsn-{secrets.token_hex(8)}@dev-smtp.invalid>\r\nMIME-Version: 1.0\r\n"
            'Content-Type: multipart/report; report-type=delivery-status; boundary="DSN"\r\n\r\n'
            "--DSN\r\nContent-Type: text/plain\r\n\r\n"
            "I'm sorry to have to inform you that your message could not be delivered.\r\n"
            "--DSN\r\nContent-Type: message/delivery-status\r\n\r\n"
            "Reporting-MTA: dns; dev-smtp.invalid\r\n\r\n"
            f"Final-Recipient: rfc822; {failed}\r\nAction: {action}\r\nStatus: {status}\r\n"
            f"Diagnostic-Code: smtp; {diagnostic}\r\n\r\n"
            "--DSN\r\nContent-Type: text/rfc822-headers\r\n\r\n"
        ).encode()
        + _head(original)
        + b"\r\n\r\n--DSN--\r\n"
    )


def arf(original: bytes, *, to: str, complainant: str | None, return_path: str | None) -> bytes:
    """An RFC 5965 abuse report about `original`, as a feedback loop sends one: the original's
    headers as the complaining mailbox stored them, so with the `Return-Path` it added from
    the envelope sender (the VERP address, when `return_path` is given); `complainant` None:
    the recipient redacted, as many feedback loops do."""
    stored = f"Return-Path: <{return_path}>\r\n".encode() if return_path else b""
    recipient = f"Original-Rcpt-To: <{complainant}>\r\n" if complainant else ""
    return (
        (
            f"From: fbl@dev-smtp.invalid\r\nTo: {to}\r\nSubject: complaint about message\r\n"
            f"Message-ID: <arf-{secrets.token_hex(8)}@dev-smtp.invalid>\r\nMIME-Version: 1.0\r\n"
            'Content-Type: multipart/report; report-type=feedback-report; boundary="ARF"\r\n\r\n'
            "--ARF\r\nContent-Type: text/plain\r\n\r\nThis is an abuse report.\r\n"
            "--ARF\r\nContent-Type: message/feedback-report\r\n\r\n"
            "Feedback-Type: abuse\r\nUser-Agent: dev-smtp/1.0\r\nVersion: 1\r\n"
            f"{recipient}\r\n"
            "--ARF\r\nContent-Type: text/rfc822-headers\r\n\r\n"
        ).encode()
        + stored
        + _head(original)
        + b"\r\n\r\n--ARF--\r\n"
    )


def reports_for(message: ReceivedMessage) -> list[bytes]:
    """What comes back for `message`, by its recipients' local parts."""
    reports = []
    for recipient in message.recipients:
        local = recipient.rpartition("@")[0].lower()
        to = message.mail_from
        if local.startswith("bounce-"):
            reports.append(
                dsn(message.data, to=to, failed=recipient, status="5.1.1",
                    diagnostic="550 5.1.1 The email account does not exist (dev)")
            )  # fmt: skip
        elif local.startswith("softbounce-"):
            reports.append(
                dsn(message.data, to=to, failed=recipient, status="4.2.2",
                    diagnostic="452 4.2.2 Mailbox full (dev)")
            )  # fmt: skip
        elif local.startswith("complain-"):
            reports.append(
                arf(message.data, to=to, complainant=recipient, return_path=message.mail_from)
            )
    return reports


class ReportSender:
    """Mails the reports for each accepted message to `host:port` (`tidings inbound`)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.stats: Counter[str] = Counter()
        self._tasks: set[asyncio.Task[None]] = set()

    def on_message(self, message: ReceivedMessage) -> None:
        """The sink's hook: sending happens after the sink has answered, never inside DATA."""
        if not message.mail_from:
            return  # a bounce is never bounced
        for report in reports_for(message):
            task = asyncio.create_task(self._send(message.mail_from, report))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _send(self, to: str, report: bytes) -> None:
        try:
            await aiosmtplib.send(
                report,
                sender=REPORTER,
                recipients=[to],
                hostname=self.host,
                port=self.port,
                timeout=10,
            )
        except (aiosmtplib.SMTPException, OSError) as exc:
            self.stats["failed"] += 1
            log.warning("dev_smtp.report_failed", error_type=type(exc).__name__)
        else:
            self.stats["sent"] += 1
