"""Settings for hearing back: bounces and complaints by mail and IMAP, and Amazon SES events."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

from pydantic import Field, SecretStr, field_validator, model_validator

from tidings.config.base import Section


class InboundSettings(Section):
    """Hearing back from providers and mailboxes (SPEC PRV-6, AUD-13)."""

    bounce_address: str | None = Field(
        default=None,
        pattern=r"^[^@\s+]+@[^@\s]+$",
        description="VERP return path of campaign mail sent by SMTP: `bounces@mail.example.org` "
        "makes each message's envelope sender `bounces+<recipient>-<mac>@mail.example.org`. "
        "Deliver that domain's mail to `tidings inbound`. Unset: the newsletter's sender address.",
    )

    act_on_unverified_reports: bool = Field(
        default=False,
        description="RISK: act on bounces and complaints by mail that no VERP MAC "
        "authenticates (sent to the bare bounce address, a wrong MAC, a Message-ID alone), by "
        "the addresses they name. Anyone who can mail the bounce domain can then suppress and "
        "unsubscribe any reader. Only for a closed relay that alone can reach `tidings "
        "inbound`. Off: such reports are kept as `unverified` for the operator to apply or "
        "discard (`tidings inbound list`).",
    )

    soft_bounce_limit: int = Field(
        default=3,
        ge=1,
        le=100,
        description="Soft bounces (mailbox full, greylisted...) after which an address is "
        "suppressed (`soft_bounce`), when they fall within `soft_bounce_window_days`. A "
        "delivery reported later clears the count.",
    )
    soft_bounce_window_days: float = Field(
        default=15.0,
        gt=0,
        le=365,
        description="The window within which `soft_bounce_limit` soft bounces suppress.",
    )
    signature_max_age_seconds: int = Field(
        default=900,
        ge=10,
        le=86_400,
        description="A signed provider event whose timestamp is further than this from now is "
        "refused as stale (replay protection, with the seen-token check).",
    )
    max_event_bytes: int = Field(
        default=262_144,
        ge=1024,
        le=10_485_760,
        description="Largest event request body (or inbound message) accepted; larger is 413.",
    )
    retention_days: float = Field(
        default=30.0,
        gt=0,
        description="Received events (applied, unmatched, unparsed and unverified) are kept "
        "this long; the decisions they led to stay on the person's history.",
    )
    imap_host: str | None = Field(
        default=None,
        description="An IMAP mailbox that bounces, complaints and unsubscribe mail are delivered "
        "to, for when the MX cannot reach `tidings inbound`: `tidings inbound --imap` polls it "
        "and deletes each message once recorded. Unset: no mailbox is polled.",
    )
    imap_port: int = Field(
        default=993, ge=1, le=65_535, description="The IMAP server's port (993: IMAPS)."
    )
    imap_tls: bool = Field(
        default=True,
        description="Connect with TLS (IMAPS), the server's certificate checked against the "
        "system's CAs. Off only for a server on the same machine.",
    )
    imap_user: str | None = Field(default=None, description="The mailbox's login name.")
    imap_password: SecretStr | None = Field(default=None, description="The mailbox's password.")
    imap_mailbox: str = Field(
        default="INBOX", min_length=1, description="The folder to read (and empty)."
    )
    imap_poll_seconds: float = Field(
        default=60.0, ge=1, le=3600, description="Seconds between two polls of the mailbox."
    )
    max_recipients: int = Field(
        default=100,
        ge=1,
        le=10_000,
        description="Recipients `tidings inbound` takes in one message; the rest get `452 "
        "Too many recipients` and the sending MTA delivers them in another transaction.",
    )
    max_connections: int = Field(
        default=100,
        ge=1,
        le=10_000,
        description="Connections `tidings inbound` holds open at once; past it a new one is "
        "answered `421` and closed (the sending MTA tries again later).",
    )
    max_connections_per_client: int = Field(
        default=20,
        ge=1,
        le=10_000,
        description="Connections one client (an IPv4 address, an IPv6 /64) may hold open at "
        "once; past it `421`. Keep it above your relay's concurrency towards tidings "
        "(Postfix: 20 by default).",
    )
    idle_timeout_seconds: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="A client that sends no command for this long (or takes longer for one "
        "message's content) is disconnected.",
    )
    session_timeout_seconds: float = Field(
        default=600.0,
        gt=0,
        le=86_400,
        description="The longest one connection may last, whatever it sends; then `421` and "
        "closed. A relay with more to deliver connects again.",
    )
    tls_certificate_file: Path | None = Field(
        default=None,
        description="PEM certificate (chain) that `tidings inbound` offers STARTTLS with, for "
        "an MX reached over the internet. Unset: no STARTTLS. Needs `tls_key_file`.",
    )
    tls_key_file: Path | None = Field(
        default=None, description="PEM private key of `tls_certificate_file`."
    )

    @model_validator(mode="after")
    def _imap_login(self) -> InboundSettings:
        if self.imap_host is not None and (self.imap_user is None or self.imap_password is None):
            raise ValueError("inbound.imap_host needs inbound.imap_user and inbound.imap_password")
        return self

    @model_validator(mode="after")
    def _tls_pair(self) -> InboundSettings:
        if (self.tls_certificate_file is None) != (self.tls_key_file is None):
            raise ValueError("STARTTLS needs both inbound.tls_certificate_file and tls_key_file")
        if self.tls_certificate_file is not None and self.tls_key_file is not None:
            try:
                ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                    self.tls_certificate_file, self.tls_key_file
                )
            except OSError as exc:  # ssl.SSLError is one
                raise ValueError(
                    "inbound.tls_certificate_file and tls_key_file: cannot load a certificate "
                    f"and its key from {self.tls_certificate_file} and {self.tls_key_file} "
                    f"({exc.strerror or exc})"
                ) from None
        return self


class SesSettings(Section):
    """Amazon SES events through SNS (SPEC PRV-6): `POST /api/events/ses`."""

    topic_arns: list[str] = Field(
        default_factory=list,
        description="The SNS topics (ARNs) your SES configuration publishes bounces, complaints "
        "and deliveries to. Messages from any other topic are refused (anyone can send SNS "
        "messages from a topic of their own). Empty: the route answers 404.",
    )
    certificate_host_pattern: str = Field(
        default=r"sns\.[a-z]{2}(-[a-z]+)+-[0-9]{1,2}\.amazonaws\.com(\.cn)?",
        description="Regular expression a host must match in full for tidings to fetch an SNS "
        "signing certificate from it (https, a path ending `.pem`), or to confirm a "
        "subscription there (https only). The default is SNS's own hosts, "
        "`sns.<region>.amazonaws.com` (GovCloud's `sns.us-gov-west-1.amazonaws.com` "
        "included) and China's `sns.cn-north-1.amazonaws.com.cn`; no other host under "
        "amazonaws.com (an S3 bucket named `sns` is `sns.s3-<region>.amazonaws.com`).",
    )
    ca_file: Path | None = Field(
        default=None,
        description="Extra CA certificates (PEM) trusted when fetching SNS certificates, for an "
        "SNS-compatible service on a private network. Unset: the system's CAs.",
    )

    @field_validator("certificate_host_pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return pattern
