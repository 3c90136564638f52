"""Settings for sending mail: the provider, SMTP, Mailgun, DKIM signing, and webhooks out."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Literal

from pydantic import AnyHttpUrl, Field, SecretStr, field_validator, model_validator

from tidings.config.annotated import OptionalDuration
from tidings.config.base import HOSTNAME_PATTERN, Section


class EmailSettings(Section):
    provider: Literal["capture", "smtp", "mailgun"] = Field(
        default="capture",
        description=(
            "`capture` stores mail locally (see `tidings outbox`); `smtp` uses a relay; "
            "`mailgun` uses Mailgun's HTTP API (the `mailgun` settings)."
        ),
    )
    from_address: str = Field(
        default="newsletter@localhost",
        pattern=r"^[^@\s]+@[^@\s]+$",
        description="Sender address of transactional mail sent through the API. Through `smtp` "
        "or `mailgun`, sends are refused while it is the default.",
    )
    from_name: str = Field(
        default="tidings",
        max_length=200,
        pattern=r"^[^\r\n\x00]*$",
        description="Sender display name of transactional mail.",
    )
    unsubscribe_address: str | None = Field(
        default=None,
        pattern=r"^[^@\s]+@[^@\s]+$",
        description=(
            "A mailbox that honours unsubscribe requests by mail (someone reads it, or a system "
            "turns a mail whose subject is `unsubscribe-TOKEN` into an unsubscribe). When set, "
            "campaign mail offers it as a `mailto:` in `List-Unsubscribe`; when unset, only the "
            "https one-click URL (RFC 8058), which tidings itself honours."
        ),
    )
    capture_retention_days: float = Field(
        default=30.0, gt=0, description="Captured mail (provider `capture`) is kept this long."
    )
    send_deadline_seconds: float = Field(
        default=10.0,
        gt=0,
        description="Whole-request deadline for one send; must be well inside queue.lease_seconds.",
    )


class SmtpSettings(Section):
    host: str = Field(default="localhost", description="SMTP relay host.")
    port: int = Field(default=587, ge=1, le=65535, description="SMTP relay port.")
    security: Literal["none", "starttls", "tls"] = Field(
        default="starttls", description="`tls` (implicit, port 465), `starttls`, or `none`."
    )
    username: str | None = Field(default=None, description="SMTP AUTH user, if the relay needs it.")
    password: SecretStr | None = Field(default=None, description="SMTP AUTH password.")
    timeout_seconds: float = Field(default=10.0, gt=0, description="Per-command SMTP timeout.")
    pool_size: int = Field(
        default=4, ge=1, le=100, description="SMTP connections kept open and reused per worker."
    )
    validate_certs: bool = Field(default=True, description="Verify the relay's TLS certificate.")


class MailgunSettings(Section):
    api_base_url: AnyHttpUrl = Field(
        default=AnyHttpUrl("https://api.mailgun.net"),
        description=(
            "Mailgun API base URL: `https://api.eu.mailgun.net` for EU domains, or the address "
            "of `tidings dev-provider` (`http://127.0.0.1:8026`) for local work."
        ),
    )
    api_key: SecretStr | None = Field(
        default=None,
        description="Mailgun private API key (sent as basic auth `api:KEY`). Needed for `mailgun`.",
    )
    domain: str | None = Field(
        default=None,
        max_length=253,
        pattern=HOSTNAME_PATTERN,
        description=(
            "Mailgun sending domain, e.g. `mg.example.com`; campaign Message-IDs end in it. "
            "Needed for `mailgun`."
        ),
    )
    timeout_seconds: float = Field(
        default=20.0,
        gt=0,
        description=(
            "Whole-request deadline for one batch (connect, send, answer); must be under 80% of "
            "`queue.lease_seconds`. A batch whose answer does not come in time is uncertain."
        ),
    )
    max_batch_size: int = Field(
        default=1000, ge=1, le=1000, description="Recipients per API call (Mailgun allows 1,000)."
    )
    delivery_time_spread_minutes: int | None = Field(
        default=None,
        ge=1,
        le=72 * 60,
        description=(
            "Spread a campaign's delivery evenly over this many minutes: each batch is handed "
            "over at once with its own delivery time (`o:deliverytime`, at most 3 days ahead). "
            "Unset: delivered as soon as submitted."
        ),
    )
    send_time_optimization_hours: int | None = Field(
        default=None,
        ge=24,
        le=72,
        description=(
            "Mailgun Send Time Optimization: each message is delivered within this many hours, "
            "when its recipient usually reads mail (`o:deliverytime-optimize-period`; paid "
            "plans). Unset: off."
        ),
    )
    webhook_signing_key: SecretStr | None = Field(
        default=None,
        description=(
            "Mailgun's HTTP webhook signing key (Sending > Webhooks). Needed to accept events "
            "at `POST /api/events/mailgun`; unset, that route answers 404."
        ),
    )


class DkimSettings(Section):
    """Optional DKIM signing by tidings itself (PRV-7), for relays that do not sign. All three
    keys, or none (then mail goes out as the relay makes it)."""

    selector: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62})$",
        description=(
            "DKIM selector: the public key is published at `SELECTOR._domainkey.DOMAIN` "
            "(docs/going-live.md)."
        ),
    )
    domain: str | None = Field(
        default=None,
        max_length=253,
        pattern=HOSTNAME_PATTERN,
        description="The signing domain (`d=`); the From address's domain, or a parent of it.",
    )
    private_key_file: Path | None = Field(
        default=None,
        description=(
            "PEM file holding the RSA private key (`openssl genrsa -out dkim.pem 2048`), "
            "readable by tidings only: a file group or others may read is refused at boot "
            "(`chmod 600 FILE`) unless `dkim.require_safe_key` is off."
        ),
    )
    require_safe_key: bool = Field(
        default=True,
        description=(
            "Refuse a `private_key_file` that its group or others may read or write (as "
            "OpenDKIM's RequireSafeKeys does). Turn off only where the file system cannot "
            "express it (some secret mounts): anyone who can read the key can sign mail as "
            "your domain."
        ),
    )
    expiry: OptionalDuration = Field(
        default=None,
        gt=timedelta(0),
        description=(
            "How long a signature stays valid (`x=` in the signature: `7d`, `48h`, seconds). "
            "Unset: no expiry. A few days covers retries and delayed delivery; a replayed "
            "copy of an old message then no longer passes DKIM."
        ),
    )

    @model_validator(mode="after")
    def _all_or_none(self) -> DkimSettings:
        given = {
            "dkim.selector": self.selector,
            "dkim.domain": self.domain,
            "dkim.private_key_file": self.private_key_file,
        }
        missing = [key for key, value in given.items() if value is None]
        if missing and len(missing) < len(given):
            raise ValueError(
                "DKIM signing needs all of " + ", ".join(given) + "; missing " + ", ".join(missing)
            )
        return self

    @model_validator(mode="after")
    def _safe_key(self) -> DkimSettings:
        path = self.private_key_file
        if path is None or not self.require_safe_key:
            return self
        mode = path.stat().st_mode
        if mode & 0o077:
            raise ValueError(
                f"dkim.private_key_file {path} may be read by group or others "
                f"(mode {mode & 0o777:o}); run `chmod 600 {path}` "
                "(or turn dkim.require_safe_key off)"
            )
        return self

    @field_validator("private_key_file")
    @classmethod
    def _readable_key(cls, path: Path | None) -> Path | None:
        if path is None:
            return None
        from dkim.crypto import UnparsableKeyError, parse_pem_private_key  # only when set

        try:
            parse_pem_private_key(path.read_bytes())
        except OSError as exc:
            raise ValueError(f"cannot read {path}: {exc.strerror}") from None
        except (UnparsableKeyError, ValueError, IndexError):
            raise ValueError(f"{path} does not hold a PEM RSA private key") from None
        return path

    @property
    def enabled(self) -> bool:
        return self.private_key_file is not None


class WebhookSettings(Section):
    allow_private_networks: bool = Field(
        default=False,
        description=(
            "Allow webhook URLs, and the feeds newsletters follow, that resolve to private, "
            "loopback or link-local addresses. Off by default (SSRF guard); turn on only for "
            "self-hosted receivers and feeds on your own network. Cloud metadata addresses stay "
            "refused either way."
        ),
    )
    deadline_seconds: float = Field(
        default=10.0, gt=0, description="Whole-request deadline for one webhook delivery."
    )
    max_response_bytes: int = Field(
        default=65_536, ge=0, description="How much of a receiver's response body is read."
    )
    per_host_concurrency: int = Field(
        default=4, ge=1, le=100, description="Requests in flight at once to one destination host."
    )
    secret_rotation_overlap_hours: float = Field(
        default=24.0,
        ge=0,
        description="After rotating an endpoint's secret, how long the old one still signs too.",
    )


class FeedSettings(Section):
    """Reading the feeds newsletters follow (AUT-2). Private addresses: see
    `webhooks.allow_private_networks`, which governs feeds too."""

    check_interval_seconds: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="How often the workers look for feeds due to be read; a digest is made "
        "at most this long after its scheduled time.",
    )
    timeout_seconds: float = Field(
        default=15.0,
        gt=0,
        le=120,
        description="Whole-read deadline for one feed: connecting, redirects and the body.",
    )
    max_bytes: int = Field(
        default=5_000_000,
        ge=10_000,
        le=100_000_000,
        description="Largest feed read (after decompression); reading stops at this size and "
        "the read fails.",
    )
    max_redirects: int = Field(
        default=5, ge=0, le=20, description="Redirects followed, each checked by the SSRF guard."
    )
    retry_seconds: float = Field(
        default=900.0,
        gt=0,
        description="After a failed read the feed is read again this long later, doubling "
        "with each failure in a row up to `retry_max_seconds`.",
    )
    retry_max_seconds: float = Field(
        default=21_600.0,
        gt=0,
        description="The longest wait between reads of a failing feed.",
    )
