"""What an SMTP relay's refusal or a failed connection means, named once for both readers:
`tidings smtp check` (each step's sentence) and the SMTP provider at send time (the cause a
send's status shows, SND-26). Wrong port, TLS from the first byte against a relay that
speaks plain SMTP first, STARTTLS missing, authentication refused, a certificate not trusted:
each is told apart by the exception, never by a guess, and `lasting` says whether trying
again can help before the configuration changes.

Causes carry reply codes and enhanced status codes, never reply text (which echoes addresses).
"""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from aiosmtplib import SMTPAuthenticationError, SMTPException, SMTPResponseException

Security = Literal["none", "starttls", "tls"]
ENHANCED_STATUS = re.compile(r"^[245]\.\d{1,3}\.\d{1,3}\b")
# What OpenSSL says when the first bytes it reads are not TLS (a relay greeting in the clear).
PLAIN_TEXT_REPLIES = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST"})
# Handshakes that fail the same way every time (no common protocol or cipher); any other TLS
# failure (a connection cut mid-handshake, say) may be the network's, and is retried.
TLS_MISMATCHES = frozenset(
    {
        "SSLV3_ALERT_HANDSHAKE_FAILURE",
        "NO_SHARED_CIPHER",
        "NO_PROTOCOLS_AVAILABLE",
        "UNSUPPORTED_PROTOCOL",
        "TLSV1_ALERT_PROTOCOL_VERSION",
        "WRONG_SSL_VERSION",
        "TLSV1_ALERT_INSUFFICIENT_SECURITY",
    }
)
# RCPT or MAIL replies that are about us, whatever the recipient: authentication required
# (530, 5.7.0) or refused (535, 5.7.8), and a relay that will not relay for us.
AUTHENTICATION_CODES = frozenset({530, 535})
AUTHENTICATION_STATUSES = frozenset({"5.7.0", "5.7.8", "5.7.14"})
# The same refusal for this many different recipient domains, none accepted in between, is
# the relay refusing us: remote domains do not agree on a reply.
SAME_REFUSAL_DOMAINS = 3
RELAY_DENIED = re.compile(
    r"relay(ing)?\s+(access\s+)?(denied|not\s+permitted|prohibited|not\s+allowed)"
    r"|unable\s+to\s+relay|authentication\s+required|must\s+authenticate",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class SmtpFault:
    """A failure named: `cause` in a few words (safe to show and log), `advice` the setting to
    look at, and whether it is `lasting` (a configuration problem, not an outage)."""

    cause: str
    advice: str
    lasting: bool

    def sentence(self) -> str:
        return f"{self.cause}: {self.advice}" if self.advice else self.cause


NO_STARTTLS = SmtpFault(
    "STARTTLS not offered",
    "set smtp.security: tls for TLS from the first byte (port 465), none only for a relay on "
    "this host",
    lasting=True,
)
NO_AUTH = SmtpFault(
    "no AUTH offered",
    "the relay offers no login on this connection: check smtp.security (many offer it only "
    "under TLS), or unset smtp.username",
    lasting=True,
)


def reply_summary(code: int, text: str) -> str:
    """The reply code and enhanced status (e.g. `451 4.3.0`): safe to log, unlike the text."""
    enhanced = ENHANCED_STATUS.match(text.strip())
    return f"{code} {enhanced.group(0)}" if enhanced else str(code)


def enhanced_status(text: str) -> str | None:
    found = ENHANCED_STATUS.match(text.strip())
    return found.group(0) if found else None


def sender_refusal(code: int, text: str) -> str | None:
    """The cause when a reply refuses us rather than the recipient, on its own evidence:
    authentication required or refused, or relaying denied. None otherwise."""
    status = enhanced_status(text)
    summary = reply_summary(code, text)
    if code in AUTHENTICATION_CODES or status in AUTHENTICATION_STATUSES:
        return f"authentication required or refused, {summary}"
    if RELAY_DENIED.search(text):
        return f"relaying denied, {summary}"
    return None


def is_policy_refusal(code: int, text: str) -> bool:
    """A permanent 5.7.x refusal (delivery not authorised, security or policy): about the
    sender when every recipient gets it."""
    status = enhanced_status(text)
    return 500 <= code <= 599 and status is not None and status.startswith("5.7.")


def is_recipient_refusal(text: str) -> bool:
    """5.1.x (the address) and 5.2.x (the mailbox) are the recipient's by RFC 3463: never
    taken for a refusal of the sender, however many domains return them."""
    status = enhanced_status(text)
    return status is not None and status[2:4] in ("1.", "2.")


class SenderWatch:
    """The relay's refusals since it last accepted a recipient, to tell a refusal of the
    sender from refusals of recipients (shared by this provider's connections)."""

    __slots__ = ("_domains", "ever_accepted")

    def __init__(self) -> None:
        self.ever_accepted = False
        self._domains: dict[str, set[str]] = {}

    def observe(
        self, recipients: Sequence[str], replies: Sequence[tuple[int, str]], accepted: Sequence[str]
    ) -> str | None:
        """The cause when these replies show the relay refusing us, else None."""
        if accepted:
            self.ever_accepted = True
            self._domains.clear()
            return None
        for recipient, reply in zip(recipients, replies, strict=False):
            if cause := self._refused(recipient, reply):
                return cause
        return None

    def _refused(self, recipient: str, reply: tuple[int, str]) -> str | None:
        code, text = reply
        if not 500 <= code <= 599:
            return None
        evident = sender_refusal(code, text)
        if evident is not None:
            return evident
        if is_recipient_refusal(text):
            return None
        summary = reply_summary(code, text)
        if is_policy_refusal(code, text) and not self.ever_accepted:
            return f"policy refusal before any recipient was accepted, {summary}"
        domains = self._domains.setdefault(summary, set())
        domains.add(recipient.rpartition("@")[2].lower())
        if len(domains) >= SAME_REFUSAL_DOMAINS:
            return f"the same refusal for {SAME_REFUSAL_DOMAINS} recipient domains, {summary}"
        return None


def connect_failure(exc: BaseException, *, security: Security, timeout_seconds: float) -> SmtpFault:
    """What went wrong opening, securing, greeting or logging in to the relay."""
    chain = list(_chain(exc))
    for link in chain:
        if isinstance(link, ssl.SSLCertVerificationError):
            why = link.verify_message or "verification failed"
            return SmtpFault(
                f"certificate not trusted: {why}",
                "give the relay's CA in SSL_CERT_FILE, or set smtp.host to the name on its "
                "certificate",
                lasting=True,
            )
    for link in chain:
        if isinstance(link, ssl.SSLError):
            reason = link.reason or type(link).__name__
            if security == "tls" and reason in PLAIN_TEXT_REPLIES:
                return SmtpFault(
                    "TLS from the first byte against a relay that speaks plain SMTP first",
                    "set smtp.security to starttls (port 587), or use the relay's TLS port (465)",
                    lasting=True,
                )
            return SmtpFault(
                f"TLS failed: {reason}",
                "check smtp.security and smtp.port",
                lasting=reason in TLS_MISMATCHES,
            )
    if isinstance(exc, SMTPAuthenticationError):
        return SmtpFault(
            f"authentication refused, {reply_summary(exc.code, exc.message)}",
            "check smtp.username and smtp.password",
            lasting=True,
        )
    if isinstance(exc, SMTPResponseException):
        summary = reply_summary(exc.code, exc.message)
        if 500 <= exc.code <= 599:
            return SmtpFault(
                f"the relay refused the connection, {summary}",
                "it does not take mail from this host: ask its operator",
                lasting=True,
            )
        return SmtpFault(f"the relay refused the connection, {summary}", "", lasting=False)
    # aiosmtplib says which extension was missing only in its message.
    if isinstance(exc, SMTPException) and "STARTTLS extension" in str(exc):
        return NO_STARTTLS
    if isinstance(exc, SMTPException) and "AUTH extension" in str(exc):
        return NO_AUTH
    if any(
        isinstance(link, TimeoutError) or "timeout" in type(link).__name__.lower() for link in chain
    ):
        if security == "tls":
            return SmtpFault(
                f"no TLS handshake or greeting within {timeout_seconds:g} s",
                "the port may expect plain SMTP first (smtp.security starttls), or a firewall "
                "drops the packets",
                lasting=False,
            )
        return SmtpFault(
            f"no greeting within {timeout_seconds:g} s",
            "the host accepted the connection and said nothing: a port expecting TLS from the "
            "first byte (smtp.security tls), or a firewall drops the packets",
            lasting=False,
        )
    if any(isinstance(link, ConnectionRefusedError) for link in chain) or (
        "refused" in str(exc).lower()
    ):
        return SmtpFault(
            "connection refused",
            "nothing listens on that host and port: check smtp.host and smtp.port",
            lasting=False,
        )
    if any(isinstance(link, socket.gaierror) for link in chain):
        return SmtpFault("host not found", "check smtp.host", lasting=False)
    return SmtpFault(f"cannot connect: {type(exc).__name__}", "", lasting=False)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__
