"""Permanent or temporary, by RFC 3463 (issue 35 item 10): with a VERP address tidings knows
whom a bounce is about, so the one question left is whether the address is dead. A full
mailbox or mail given up on after retries is not evidence of that, whatever the DSN's Action."""

from __future__ import annotations

import pytest

from tidings.delivery.inbound_mail import read_report

FAILED = "reader@example.test"


def _dsn(status: str, action: str = "failed", diagnostic: str = "550 5.1.1 user unknown") -> bytes:
    return (
        "From: MAILER-DAEMON@mx.example.net\r\nTo: bounces@mail.example.org\r\n"
        "Subject: Undelivered Mail Returned to Sender\r\nMIME-Version: 1.0\r\n"
        'Content-Type: multipart/report; report-type=delivery-status; boundary="B"\r\n\r\n'
        "--B\r\nContent-Type: text/plain\r\n\r\nYour message could not be delivered.\r\n"
        "--B\r\nContent-Type: message/delivery-status\r\n\r\n"
        "Reporting-MTA: dns; mx.example.net\r\n\r\n"
        f"Final-Recipient: rfc822; {FAILED}\r\nAction: {action}\r\nStatus: {status}\r\n"
        f"Diagnostic-Code: smtp; {diagnostic}\r\n\r\n--B--\r\n"
    ).encode()


def _permanent(data: bytes) -> bool:
    report = read_report(data, report_id="r", to_unsubscribe=False)
    assert report.kind == "bounce"
    [failure] = report.failures
    return failure.permanent


@pytest.mark.parametrize(
    ("status", "permanent"),
    [
        ("5.1.1", True),  # no such user
        ("5.1.10", True),  # null MX
        ("5.4.4", True),  # unable to route: no such domain
        ("5.7.1", True),  # refused by policy
        ("5.2.2", False),  # mailbox full: clears when its owner makes room
        ("5.4.7", False),  # delivery time expired: given up after retries
        ("4.4.1", False),  # Postfix giving up after its retries: Action failed, status 4
        ("4.2.2", False),
    ],
)
def test_a_dsn_status_decides_by_rfc_3463(status: str, permanent: bool) -> None:
    """A hard bounce suppresses for good: only a status saying the address is dead may."""
    assert _permanent(_dsn(status)) is permanent


def test_mail_abandoned_after_retries_without_a_status_is_soft() -> None:
    """Exim's "retry timeout exceeded" bounce has no DSN status; flufl.bounce calls it a
    permanent failure, but nothing says the mailbox is gone."""
    data = (
        b"From: Mail Delivery System <Mailer-Daemon@mx.example.net>\r\n"
        b"To: bounces@mail.example.org\r\nSubject: Mail delivery failed: returning message "
        b"to sender\r\nX-Failed-Recipients: reader@example.test\r\n\r\n"
        b"This message was created automatically by mail delivery software.\r\n\r\n"
        b"A message that you sent could not be delivered to one or more of its\r\n"
        b"recipients. This is a permanent error. The following address(es) failed:\r\n\r\n"
        b"  reader@example.test\r\n    retry timeout exceeded\r\n"
    )
    assert _permanent(data) is False


def test_a_dead_address_without_a_status_stays_hard() -> None:
    """The same Exim bounce for an unknown user is a hard bounce."""
    data = (
        b"From: Mail Delivery System <Mailer-Daemon@mx.example.net>\r\n"
        b"To: bounces@mail.example.org\r\nSubject: Mail delivery failed: returning message "
        b"to sender\r\nX-Failed-Recipients: reader@example.test\r\n\r\n"
        b"This message was created automatically by mail delivery software.\r\n\r\n"
        b"A message that you sent could not be delivered to one or more of its\r\n"
        b"recipients. This is a permanent error. The following address(es) failed:\r\n\r\n"
        b"  reader@example.test\r\n    Unrouteable address\r\n"
    )
    assert _permanent(data) is True
