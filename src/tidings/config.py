"""Settings: every configuration key, typed, described and validated (SPEC CFG-1).

Keys are grouped in sections. A key `section.name` is set by the environment variable
`TIDINGS_SECTION_NAME` or by `name = ...` under `[section]` in a TOML file given with
`--config` (or `TIDINGS_CONFIG`). The environment wins over the file; defaults make
`tidings serve` work with no configuration at all.
"""

from __future__ import annotations

import os
import re
import ssl
import tomllib
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AnyHttpUrl,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

ENV_PREFIX = "TIDINGS_"
CONFIG_FILE_ENV = "TIDINGS_CONFIG"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
HOSTNAME_PATTERN = rf"^{_LABEL}(?:\.{_LABEL})+$"
MIN_SECRET_BYTES = 32


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DatabaseSettings(_Section):
    url: str = Field(
        default="sqlite:///./tidings.db",
        description=(
            "Database URL. `sqlite:///path/to/file.db` (the default, one machine) or "
            "`postgresql://user:password@host:5432/dbname` (many workers, many machines)."
        ),
    )
    sqlite_busy_timeout_ms: int = Field(
        default=30_000,
        ge=0,
        description="SQLite only: how long a writer waits for the write lock before failing.",
    )
    pool_size: int = Field(
        default=10, ge=1, le=200, description="PostgreSQL only: connections kept per process."
    )

    @field_validator("url")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        scheme = value.split("://", 1)[0].split("+", 1)[0]
        if "://" not in value or scheme not in {"sqlite", "postgresql", "postgres"}:
            raise ValueError("expected sqlite:///FILE or postgresql://USER@HOST/DB")
        return value


class HttpSettings(_Section):
    host: str = Field(default="127.0.0.1", description="Address `serve` and `api` listen on.")
    port: int = Field(default=8000, ge=1, le=65535, description="Port `serve` and `api` listen on.")
    trusted_proxies: str = Field(
        default="127.0.0.1",
        max_length=1000,
        pattern=r"^[0-9A-Fa-f:.,/* ]*$",
        description=(
            "Comma-separated proxy addresses (or `*`) whose X-Forwarded-For is believed; the "
            "client address feeds the per-IP subscribe limit."
        ),
    )
    max_body_bytes: int = Field(
        default=1_048_576,
        ge=1024,
        description="Largest request body accepted; larger bodies get 413.",
    )
    cors_origins: str = Field(
        default="",
        max_length=4000,
        description=(
            "Comma-separated origins (`https://example.com`) of other sites that may embed "
            "the signup form (`/subscribe/{slug}/embed`, as `frame-ancestors`) and call "
            "`POST /api/subscribe` from a browser (CORS). Empty: this site only."
        ),
    )

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: str) -> str:
        for origin in _split(value):
            if not _ORIGIN.fullmatch(origin):
                raise ValueError(f"{origin!r} is not an origin like https://example.com[:port]")
        return value

    @property
    def allowed_origins(self) -> tuple[str, ...]:
        """The configured origins, lower-cased and without a trailing slash."""
        return tuple(origin.lower().rstrip("/") for origin in _split(self.cors_origins))


def duration(value: Any) -> Any:
    """`24h`, `90m`, `2d`, `30s` or a number of seconds as a timedelta; ISO 8601 text and
    anything else left to pydantic."""
    if not isinstance(value, str) or value.strip().upper().startswith("P"):
        return value
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd]?)", value.strip().lower())
    if match is None:
        raise ValueError("expected a duration such as 24h, 90m, 2d or 86400 (seconds)")
    unit = {"": "seconds", "s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
    return timedelta(**{unit[match[2]]: float(match[1])})


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


_ORIGIN = re.compile(r"https?://[A-Za-z0-9.-]+(?::\d{1,5})?/?")


class MetricsSettings(_Section):
    """Prometheus metrics (SPEC OBS-2). They need no API key, so they are off by default."""

    enabled: bool = Field(
        default=False,
        description=(
            "Serve Prometheus metrics at `/metrics` on the API port of `serve` and `api`. "
            "Off by default: anyone who reaches the API port could read them."
        ),
    )
    port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description=(
            "Serve `/metrics` on this port of its own instead (and not on the API port); "
            "setting it turns metrics on. `tidings worker` serves its metrics only here "
            "(or on `--metrics-port`)."
        ),
    )
    host: str | None = Field(
        default=None,
        max_length=253,
        description="Address the metrics port listens on (default: `http.host`).",
    )

    @property
    def on_api_port(self) -> bool:
        return self.enabled and self.port is None


class SiteSettings(_Section):
    name: str = Field(default="tidings", min_length=1, max_length=200, description="Site name.")
    public_url: AnyHttpUrl = Field(
        default=AnyHttpUrl("http://127.0.0.1:8000"),
        description="Public base URL used in links inside emails (confirm, unsubscribe). Set "
        "it before real mail goes out: through `smtp` or `mailgun` sends are refused while it is "
        "the default.",
    )
    secret: SecretStr | None = Field(
        default=None,
        description=(
            "Site secret for signing tokens and hashing suppressed addresses, at least 32 "
            "bytes (`openssl rand -base64 32`). When unset, one is generated on first start "
            "and kept in the database."
        ),
    )

    timezone: str = Field(
        default="UTC",
        min_length=1,
        max_length=64,
        description="The site's time zone, an IANA name such as `Europe/Paris`: the admin shows "
        "schedules in it (beside UTC) and reads a schedule's time in it unless told UTC.",
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        # An unknown name would only fail when someone schedules a send: refuse it at start.
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            raise ValueError(
                f"{value!r} is not an IANA time zone name (e.g. Europe/Paris, America/New_York)"
            ) from None
        return value

    @field_validator("secret")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        # A short secret can be brute-forced from one signed link, and then every link forged.
        if value is not None and len(value.get_secret_value().encode()) < MIN_SECRET_BYTES:
            raise ValueError(
                f"must be at least {MIN_SECRET_BYTES} bytes (e.g. `openssl rand -base64 32`); "
                "leave it unset to have one generated"
            )
        return value


class PrivacySettings(_Section):
    suppression_key: SecretStr | None = Field(
        default=None,
        min_length=16,
        description=(
            "Key for the keyed hashes of addresses (suppressions, AUD-8), kept outside the "
            "database so that a leaked dump cannot be used to test guessed addresses against "
            "the suppression list. Set it once: the stored hashes are re-keyed at the next "
            "start, and it cannot be changed or removed afterwards. See docs/audience.md."
        ),
    )
    suppression_key_file: Path | None = Field(
        default=None,
        description="A file holding `suppression_key` (its first line), e.g. a mounted secret.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> PrivacySettings:
        if self.suppression_key is not None and self.suppression_key_file is not None:
            raise ValueError("set suppression_key or suppression_key_file, not both")
        return self


class LogSettings(_Section):
    level: Literal["debug", "info", "warning", "error"] = Field(
        default="info",
        description="Lowest level written by `serve`, `api` and `worker`; other commands never "
        "write below `warning`, so their output stays clean (`tidings --log-level` overrides).",
    )
    format: Literal["auto", "json", "console"] = Field(
        default="auto",
        description="`json` for machines, `console` for people, `auto` picks console on a TTY.",
    )
    sentry_dsn: SecretStr | None = Field(
        default_factory=lambda: (
            SecretStr(os.environ["SENTRY_DSN"]) if os.environ.get("SENTRY_DSN") else None
        ),
        description="Report error-level events to Sentry (needs `tidings[sentry]`). The "
        "standard `SENTRY_DSN` variable works too.",
    )


class QueueSettings(_Section):
    lease_seconds: float = Field(
        default=60.0,
        gt=0,
        description="How long a claimed job is reserved before another worker may reclaim it.",
    )
    poll_interval_seconds: float = Field(
        default=1.0,
        gt=0,
        le=300,
        description="How often an idle worker looks for due jobs (PostgreSQL also uses NOTIFY).",
    )
    max_attempts: int = Field(
        default=12, ge=1, le=100, description="Attempts before a job is `dead`."
    )
    backoff_base_seconds: float = Field(
        default=5.0, gt=0, description="First retry waits up to this long (doubling each time)."
    )
    backoff_max_seconds: float = Field(
        default=3600.0, gt=0, description="Longest wait between two attempts."
    )
    shutdown_grace_seconds: float = Field(
        default=30.0, ge=0, description="On SIGTERM, how long in-flight jobs may take to finish."
    )
    prune_interval_seconds: float = Field(
        default=3600.0, gt=0, description="How often finished jobs and old attempts are pruned."
    )
    retention_days: float = Field(
        default=7.0,
        gt=0,
        description="Finished and dead jobs, and finished webhook deliveries, older than this "
        "are pruned.",
    )
    email_concurrency: int = Field(
        default=8, ge=1, le=1000, description="Transactional emails sent at once per worker."
    )
    webhook_concurrency: int = Field(
        default=16, ge=1, le=1000, description="Webhook requests in flight at once per worker."
    )

    @model_validator(mode="after")
    def _backoff_range(self) -> QueueSettings:
        if self.backoff_max_seconds < self.backoff_base_seconds:
            raise ValueError("backoff_max_seconds must be at least backoff_base_seconds")
        return self


class EmailSettings(_Section):
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


class BulkEmailSettings(_Section):
    """How campaigns are prepared and submitted (SPEC §5.3-5.5)."""

    batch_size: int = Field(
        default=1000,
        ge=1,
        le=1000,
        description="Recipients per batch (a page of the audience); never above the provider's "
        "maximum.",
    )
    batch_creation_concurrency: int = Field(
        default=2,
        description="Pages of the audience turned into batches at once per campaign. A positive "
        "integer; raise it only after measuring database load.",
    )
    submission_concurrency: int = Field(
        default=8,
        ge=1,
        le=100,
        description="SMTP only: messages of one batch handed to the relay at once (bounded by "
        "smtp.pool_size connections).",
    )
    in_flight_chunk: int = Field(
        default=20,
        ge=1,
        le=1000,
        description="SMTP only: recipients marked in flight together before they are handed "
        "over. A worker killed mid-send leaves at most this many `uncertain` recipients per "
        "batch it held (never resent automatically).",
    )
    recipient_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="SMTP only: extra tries, inside one batch attempt, for a recipient the relay "
        "deferred (4xx) before it is recorded as failed (transient).",
    )
    concurrency: int = Field(
        default=2,
        ge=1,
        le=100,
        description="Campaign batches one worker submits at once (every worker serving the "
        "campaign queue takes batches, so more workers add throughput).",
    )
    warming_domain: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9.-]+\.[A-Za-z]{2,}$",
        description="Optional sending domain being warmed up: pages go to it, in audience "
        "order, up to its daily capacity; the rest use the newsletter's own domain.",
    )
    warming_daily_capacity: int = Field(
        default=0,
        ge=0,
        description="Recipients the warming domain may take per UTC day (0 = none).",
    )
    send_rate_per_second: float = Field(
        default=0.0,
        ge=0,
        le=1_000_000,
        allow_inf_nan=False,
        description="Most messages per second sent through the provider, shared by all workers "
        "on all machines (kept in the database, so a restart does not burst); 0 = unlimited. "
        "A 429 from the provider pauses every worker for its Retry-After either way.",
    )

    auto_pause_hard_bounce_rate: float = Field(
        default=0.05,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="A sending campaign pauses itself (SND-24) when more than this fraction of "
        "its messages handed over hard-bounced, once `auto_pause_hard_bounce_sample` went "
        "out; 0 turns the check off. 0.05 = 5%.",
    )
    auto_pause_hard_bounce_sample: int = Field(
        default=500,
        ge=1,
        description="Messages handed over before the hard-bounce rate is judged.",
    )
    auto_pause_complaint_rate: float = Field(
        default=0.001,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="A sending campaign pauses itself when more than this fraction of its "
        "messages handed over drew a spam complaint, once `auto_pause_complaint_sample` went "
        "out; 0 turns the check off. 0.001 = 0.1% (Gmail and Yahoo ask bulk senders to stay "
        "under 0.3%).",
    )
    auto_pause_complaint_sample: int = Field(
        default=1000,
        ge=1,
        description="Messages handed over before the complaint rate is judged.",
    )
    domain_rates: Annotated[dict[str, float], NoDecode] = Field(
        default_factory=dict,
        description="Most messages per minute to each recipient domain, shared by all workers "
        "(SND-25): `gmail.com=600,example.net=300` in the environment, or a TOML table. "
        "Empty (the default): no per-domain limit. A 421/451 naming a domain halves its rate "
        "for `domain_rate_cool_down_seconds`.",
    )
    domain_rate_cool_down_seconds: float = Field(
        default=300.0,
        ge=1,
        le=86_400,
        allow_inf_nan=False,
        description="How long a domain's rate stays halved after a 421/451; each further "
        "deferral halves it again (to 1/16 at most), and each cool-down without one doubles it "
        "back.",
    )

    resume_max_age: timedelta = Field(
        default=timedelta(hours=24),
        gt=timedelta(0),
        le=timedelta(days=30),
        description="An interrupted send (workers stopped or its jobs died) younger than this "
        "is resumed when a worker starts and by the sweep; an older one is logged "
        "(`campaign.send_not_resumed`) and left for an operator, so readers never get a stale "
        "issue days late. Age counts from the send (or its schedule time). `24h`, `90m`, "
        "`2d`, a number of seconds, or ISO 8601 (`PT24H`).",
    )
    sweep_interval_seconds: float = Field(
        default=300.0,
        ge=1,
        le=86_400,
        description="How often each worker looks for sends left `pending` or `submitting` with "
        "no live job and hands them back to the send handler (it also looks once at start).",
    )

    @field_validator("resume_max_age", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return duration(value)

    @field_validator("domain_rates", mode="before")
    @classmethod
    def _domain_rates(cls, value: Any) -> Any:
        # `gmail.com=600,example.net=300` from the environment; a TOML table as it is.
        if isinstance(value, str):
            pairs: dict[str, Any] = {}
            for item in filter(None, (part.strip() for part in value.split(","))):
                domain, equals, rate = item.partition("=")
                if not equals:
                    raise ValueError(f"expected domain=messages_per_minute, got {item!r}")
                pairs[domain.strip()] = rate.strip()
            value = pairs
        if isinstance(value, dict):
            checked: dict[str, float] = {}
            for domain, rate in value.items():
                name = str(domain).strip().lower().rstrip(".")
                if not re.fullmatch(r"[a-z0-9-]+(\.[a-z0-9-]+)+", name) or len(name) > 255:
                    raise ValueError(f"{domain!r} is not a domain name")
                try:
                    per_minute = float(rate)
                except (TypeError, ValueError):
                    raise ValueError(f"the rate of {name} is not a number") from None
                if not 0 < per_minute <= 1_000_000 or per_minute != per_minute:
                    raise ValueError(f"the rate of {name} must be above 0 messages per minute")
                checked[name] = per_minute
            return checked
        return value

    @field_validator("batch_creation_concurrency", mode="before")
    @classmethod
    def _positive_integer(cls, value: Any) -> int:
        # Strictly a positive integer: no booleans, fractions, or words.
        if isinstance(value, bool):
            raise ValueError("must be a positive integer")
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError("must be a positive integer, not a fraction")
            value = int(value)
        if isinstance(value, str):
            if not value.strip().isdigit():
                raise ValueError("must be a positive integer")
            value = int(value.strip())
        if not isinstance(value, int) or value < 1:
            raise ValueError("must be a positive integer")
        return value


class SmtpSettings(_Section):
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


class MailgunSettings(_Section):
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


class InboundSettings(_Section):
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


class SesSettings(_Section):
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


class WebhookSettings(_Section):
    allow_private_networks: bool = Field(
        default=False,
        description=(
            "Allow webhook URLs that resolve to private, loopback or link-local addresses. Off by "
            "default (SSRF guard); turn on only for self-hosted receivers on your own network."
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


class AudienceSettings(_Section):
    confirm_token_ttl_hours: int = Field(
        default=72, ge=1, le=24 * 30, description="How long a confirmation link stays valid."
    )
    subscribe_limit_per_ip: int = Field(
        default=20, ge=1, description="Subscribe requests per client address per window."
    )
    subscribe_limit_per_address: int = Field(
        default=5, ge=1, description="Subscribe requests per target email address per window."
    )
    rate_limit_window_seconds: int = Field(
        default=3600, ge=1, description="Length of the subscribe rate-limit window."
    )
    honeypot: bool = Field(
        default=True,
        description=(
            "Signup forms carry a field hidden from people; a post that fills it in (a bot) "
            "gets the usual thank-you and nothing is done."
        ),
    )
    altcha: bool = Field(
        default=False,
        description=(
            "Ask every signup (the forms and `POST /api/subscribe`) for an ALTCHA "
            "proof-of-work solution from `GET /api/altcha/challenge`. The forms solve it in "
            "the browser with a few lines of JavaScript; API callers must solve it themselves."
        ),
    )
    altcha_max_number: int = Field(
        default=100_000,
        ge=1_000,
        le=10_000_000,
        description=(
            "ALTCHA difficulty: the search space of a challenge. A browser tries about half "
            "of it on average (100,000: well under a second on a phone)."
        ),
    )


class AdminUiSettings(_Section):
    session_idle_minutes: int = Field(
        default=60,
        ge=1,
        le=24 * 60,
        description="An admin UI session ends after this long without a request.",
    )
    session_absolute_hours: int = Field(
        default=12,
        ge=1,
        le=24 * 30,
        description="An admin UI session ends this long after sign-in, however busy.",
    )
    docs_url: str = Field(
        default="",
        max_length=500,
        pattern=r"^(https?://\S+)?$",
        description="Where the admin's help links point: the URL of the `docs/` folder (e.g. "
        "your copy of the repository's docs). Empty: the pages name the file and section, "
        "found in `docs/` beside the code.",
    )
    cookie_secure: Literal["auto", "always", "never"] = Field(
        default="auto",
        description=(
            "Mark the session cookie Secure (sent over HTTPS only). `auto`: when site.public_url "
            "is https; `never` only for plain http://localhost development."
        ),
    )
    sign_in_limit_per_client: int = Field(
        default=10,
        ge=1,
        description=(
            "Failed sign-ins on an account from one browser that signed in to it before (a "
            "signed cookie) before that browser is slowed. Strangers' failures never count "
            "against it, so the owner's browsers get in however the account is attacked. "
            "Successful sign-ins never count."
        ),
    )
    sign_in_limit_per_ip: int = Field(
        default=30,
        ge=1,
        description=(
            "Failed sign-ins from one client address, over every account, before new "
            "browsers from it are slowed. Browsers that signed in to the account before are "
            "exempt, so a shared proxy address cannot lock everyone out."
        ),
    )
    sign_in_window_seconds: int = Field(
        default=900,
        ge=1,
        description="Failed sign-ins are forgotten this long after the last one of their scope.",
    )
    sign_in_limit_per_account: int = Field(
        default=10,
        ge=1,
        description=(
            "Failed sign-ins on one account from new browsers together before they are "
            "slowed: past it each attempt waits 1 second, doubling with each further failure "
            "up to `sign_in_max_delay_seconds`. Never a longer lock-out."
        ),
    )
    sign_in_max_delay_seconds: int = Field(
        default=60,
        ge=1,
        le=900,
        description="The longest a slowed sign-in waits before its next attempt.",
    )
    password_check_concurrency: int = Field(
        default=2,
        ge=1,
        le=64,
        description=(
            "Password hashes computed at once (64 MiB each); further sign-in attempts wait "
            "their turn, so a burst of attempts cannot exhaust memory."
        ),
    )
    require_two_factor: bool = Field(
        default=False,
        description=(
            "Every operator must sign in with a TOTP code; one without two-factor set up is "
            "sent to set it up right after the password."
        ),
    )
    audit_retention_days: int = Field(
        default=365,
        ge=1,
        le=36500,
        description=(
            "Audit log entries older than this are deleted by the worker's maintenance pass."
        ),
    )
    api_docs: Literal["public", "signed_in", "off"] = Field(
        default="public",
        description=(
            "`/docs`, `/redoc` and `/openapi.json`: `public` (the default: the API is open "
            "source, its shape no secret), `signed_in` (only for a signed-in admin UI "
            "operator) or `off` (404)."
        ),
    )


class DkimSettings(_Section):
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
    expiry: timedelta | None = Field(
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

    @field_validator("expiry", mode="before")
    @classmethod
    def _expiry(cls, value: Any) -> Any:
        return duration(value)

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


class ThemeSettings(_Section):
    postal_address: str = Field(
        default="Your Publication, 1 Example Street, Springfield",
        min_length=1,
        max_length=300,
        pattern=r"^[^\r\n\x00<>]*$",
        description="The publisher's postal address, shown in every campaign footer. Through "
        "`smtp` or `mailgun`, sends are refused while it is the default.",
    )
    logo_url: str | None = Field(
        default=None,
        pattern=r"^https://[^\s\"'<>]+$",
        description="An https URL of the logo shown in the email header.",
    )
    accent_color: str = Field(
        default="#9b2c1f",
        pattern=r"^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$",
        description="Accent colour for links, buttons and rules (#rrggbb).",
    )
    body_font: str = Field(
        default="Georgia, Cambria, 'Times New Roman', Times, serif",
        pattern=r"^[A-Za-z0-9 ,'\"-]{1,300}$",
        description="CSS font stack for body text.",
    )
    heading_font: str = Field(
        default="Georgia, Cambria, 'Times New Roman', Times, serif",
        pattern=r"^[A-Za-z0-9 ,'\"-]{1,300}$",
        description="CSS font stack for headings.",
    )


class Settings(BaseSettings):
    """The effective configuration of one tidings process."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="_",
        env_nested_max_split=1,
        extra="forbid",
        frozen=True,
        toml_file=None,
    )

    database: DatabaseSettings = DatabaseSettings()
    http: HttpSettings = HttpSettings()
    metrics: MetricsSettings = MetricsSettings()
    site: SiteSettings = SiteSettings()
    log: LogSettings = LogSettings()
    queue: QueueSettings = QueueSettings()
    email: EmailSettings = EmailSettings()
    smtp: SmtpSettings = SmtpSettings()
    mailgun: MailgunSettings = MailgunSettings()
    dkim: DkimSettings = DkimSettings()
    bulk_email: BulkEmailSettings = BulkEmailSettings()
    webhooks: WebhookSettings = WebhookSettings()
    inbound: InboundSettings = InboundSettings()
    ses: SesSettings = SesSettings()
    audience: AudienceSettings = AudienceSettings()
    privacy: PrivacySettings = PrivacySettings()
    theme: ThemeSettings = ThemeSettings()
    admin_ui: AdminUiSettings = AdminUiSettings()
    # Where the values came from (the settings page): the file read and the keys given in code.
    _config_file: Path | None = PrivateAttr(default=None)
    _given: frozenset[str] = PrivateAttr(default=frozenset())

    @model_validator(mode="after")
    def _send_deadline_inside_lease(self) -> Settings:
        # A send that outlives its lease could be reclaimed and sent twice (DLV-2).
        deadlines = [
            ("email.send_deadline_seconds", self.email.send_deadline_seconds),
            ("webhooks.deadline_seconds", self.webhooks.deadline_seconds),
        ]
        if self.email.provider == "mailgun":  # transactional mail then goes through it
            deadlines.append(("mailgun.timeout_seconds", self.mailgun.timeout_seconds))
        for key, deadline in deadlines:
            if deadline >= self.queue.lease_seconds * 0.8:
                raise ValueError(
                    f"{key} must be shorter than 80% of queue.lease_seconds "
                    f"({self.queue.lease_seconds * 0.8:g})"
                )
        return self

    @model_validator(mode="after")
    def _mailgun_needs_credentials(self) -> Settings:
        if self.email.provider == "mailgun":
            key = self.mailgun.api_key
            if key is None or not key.get_secret_value():
                raise ValueError(_needed_for_mailgun("mailgun.api_key"))
            if not self.mailgun.domain:
                raise ValueError(_needed_for_mailgun("mailgun.domain"))
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _StrictToml(settings_cls))


# The publisher's identity in real mail; their defaults are placeholders (SendingIdentity).
IDENTITY_KEYS = ("theme.postal_address", "email.from_address", "site.public_url")


def placeholder_identity(settings: Settings) -> tuple[str, ...]:
    """The identity keys still at their defaults, each as `key (ENV_VAR)`."""
    found = []
    for key in IDENTITY_KEYS:
        section_name, name = key.split(".")
        section = getattr(settings, section_name)
        default = type(section).model_fields[name].default
        if str(getattr(section, name)) == str(default):
            found.append(f"{key} ({ENV_PREFIX}{key.replace('.', '_').upper()})")
    return tuple(found)


def _needed_for_mailgun(key: str) -> str:
    env_var = ENV_PREFIX + key.replace(".", "_").upper()
    return f"{key} ({env_var}) must be set when email.provider is mailgun"


class ConfigurationError(Exception):
    """Raised for an invalid setting; the message names the key and the expected form."""


class _StrictToml(TomlConfigSettingsSource):
    """The TOML file, typed as strictly as the environment is read (CFG-1): TOML has types,
    so a value of the wrong one (`"2"` or `2.0` for an integer, `"30"` for a number) is a
    mistake to report, not a value to coerce."""

    def __call__(self) -> dict[str, Any]:
        values = super().__call__()
        problems = []
        fields = dict(iter_keys())
        for section, keys in values.items():
            if not isinstance(keys, dict):
                continue  # a key outside any section: pydantic reports it
            for name, value in keys.items():
                field = fields.get(f"{section}.{name}")
                problem = None if field is None else _toml_type_problem(field.annotation, value)
                if problem is not None:
                    key = f"{section}.{name}"
                    env_var = ENV_PREFIX + key.replace(".", "_").upper()
                    problems.append(f"{key} ({env_var}): {problem} in the configuration file")
        if problems:
            raise _TomlTypeError("invalid configuration: " + "; ".join(problems))
        return values


class _TomlTypeError(ValueError):
    """A TOML value of the wrong type; the message names the key."""


def _toml_type_problem(annotation: Any, value: Any) -> str | None:
    """Why `value`, as TOML typed it, cannot be a setting of type `annotation` (or None)."""
    if get_origin(annotation) in (Union, UnionType):
        options = [arg for arg in get_args(annotation) if arg is not type(None)]
        problems = [_toml_type_problem(option, value) for option in options]
        return None if None in problems else problems[0]
    if get_origin(annotation) in (list, tuple, set, frozenset):
        if not isinstance(value, list):
            return 'expected a TOML array, such as ["a", "b"]'
        (item,) = {arg for arg in get_args(annotation) if arg is not Ellipsis} or {str}
        problems = [_toml_type_problem(item, element) for element in value]
        return next((f"in the array: {problem}" for problem in problems if problem), None)
    if get_origin(annotation) is dict:
        if not isinstance(value, dict):
            return 'expected a TOML table, such as { "gmail.com" = 600 }'
        _key, item = get_args(annotation)
        problems = [_toml_type_problem(item, element) for element in value.values()]
        return next((f"in the table: {problem}" for problem in problems if problem), None)
    if isinstance(value, bool) and annotation is not bool:
        return "expected " + _TOML_FORMS.get(annotation, "a string") + ", found true/false"
    accepted = {
        bool: (bool,),
        int: (int,),
        float: (int, float),
        timedelta: (int, float, str),  # seconds, or `24h` / ISO 8601 text
    }.get(annotation, (str,))
    if isinstance(value, accepted):
        return None
    found = "a string" if isinstance(value, str) else f"a TOML {type(value).__name__}"
    return f"expected {_TOML_FORMS.get(annotation, 'a string')}, found {found}"


_TOML_FORMS: dict[Any, str] = {
    bool: "true or false",
    int: 'a whole number without quotes (2, not "2" or 2.0)',
    float: "a number without quotes",
    timedelta: 'a duration such as "24h" or a number of seconds',
}


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Read settings from the environment and an optional TOML file, fully validated."""
    if config_file is None and os.environ.get(CONFIG_FILE_ENV):
        config_file = Path(os.environ[CONFIG_FILE_ENV])
    if config_file is not None and not config_file.is_file():
        raise ConfigurationError(f"configuration file not found: {config_file}")

    class _FromFile(Settings):
        model_config = SettingsConfigDict(toml_file=config_file)

    try:
        settings = _FromFile(**overrides)
    except _TomlTypeError as exc:
        raise ConfigurationError(str(exc)) from None
    except ValidationError as exc:
        raise ConfigurationError(describe_validation_error(exc)) from None
    except (ValueError, OSError) as exc:  # malformed TOML
        raise ConfigurationError(f"cannot read configuration file {config_file}: {exc}") from None
    settings._config_file = config_file
    settings._given = frozenset(_leaf_keys(overrides))
    return settings


def _leaf_keys(values: dict[str, Any], prefix: str = "") -> list[str]:
    """`{"site": {"name": ...}}` -> ["site.name"]; a section given whole names all its keys."""
    keys: list[str] = []
    for name, value in values.items():
        if isinstance(value, dict):
            keys.extend(_leaf_keys(value, f"{prefix}{name}."))
        elif isinstance(value, BaseModel):
            keys.extend(f"{prefix}{name}.{field}" for field in value.model_fields_set)
        else:
            keys.append(f"{prefix}{name}")
    return keys


def setting_origins(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Where each key's effective value came from, by the precedence `load_settings` applies:
    `start-up` (given by the program that started it), `environment`, `file` (the TOML file)
    or `default`."""
    environ = os.environ if environ is None else environ
    present = {name.upper() for name in environ}
    from_file: set[str] = set()
    config_file = settings._config_file
    if config_file is not None and config_file.is_file():
        with config_file.open("rb") as handle:
            table = tomllib.load(handle)
        from_file = set(_leaf_keys(table))
    origins = {}
    for key, _field in iter_keys():
        env_var = ENV_PREFIX + key.replace(".", "_").upper()
        if key in settings._given:
            origins[key] = "start-up"
        elif env_var in present or (key == "log.sentry_dsn" and "SENTRY_DSN" in present):
            origins[key] = "environment"
        elif key in from_file:
            origins[key] = "file"
        else:
            origins[key] = "default"
    return origins


def describe_validation_error(exc: ValidationError) -> str:
    """One line per invalid key: `key (ENV_VAR): problem`. Values are never echoed."""
    lines = []
    for error in exc.errors(include_input=False, include_url=False):
        key = ".".join(str(part) for part in error["loc"])
        env_var = ENV_PREFIX + key.replace(".", "_").upper()
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown setting"
        # Cross-key rules (raised by a model validator) name their keys in the message.
        lines.append(f"{key} ({env_var}): {message}" if key else message)
    return "invalid configuration: " + "; ".join(lines)


def iter_keys(model: type[BaseModel] = Settings, prefix: str = "") -> list[tuple[str, Any]]:
    """Every leaf key as (`section.name`, field info), in declaration order."""
    keys: list[tuple[str, Any]] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys.extend(iter_keys(annotation, f"{prefix}{name}."))
        else:
            keys.append((f"{prefix}{name}", field))
    return keys


def masked(settings: Settings) -> dict[str, dict[str, Any]]:
    """The effective settings as plain data with every secret replaced by `********`."""
    shown: dict[str, dict[str, Any]] = {}
    for section_name in type(settings).model_fields:
        section = getattr(settings, section_name)
        values: dict[str, Any] = {}
        for key in type(section).model_fields:
            value = getattr(section, key)
            if isinstance(value, SecretStr):
                value = "********"
            elif isinstance(value, timedelta):
                value = format_duration(value)  # a form `--config` reads back
            elif isinstance(value, dict):
                value = {str(name): item for name, item in value.items()}  # domain_rates
            elif isinstance(value, list | tuple | set | frozenset):
                value = [
                    item if isinstance(item, int | float | str) else str(item) for item in value
                ]
            elif value is not None and not isinstance(value, bool | int | float | str):
                value = str(value)
            if isinstance(value, str) and "://" in value:
                value = mask_url_password(value)  # database.url, mailgun.api_base_url, ...
            values[key] = value
        shown[section_name] = values
    return shown


def format_duration(value: timedelta) -> str:
    """`24h`, `90m`, `2d` or seconds: the shortest form the duration settings read back."""
    seconds = value.total_seconds()
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


_SECRET_PARAMETER = re.compile(r"pass|pwd|secret|token|key|auth|credential|sig", re.IGNORECASE)


def mask_url_password(url: str) -> str:
    """The URL with its secrets replaced by `********`: the password in its userinfo
    (`postgresql://u:********@h/db`), the whole userinfo of a web URL, where a lone name is a
    key (`https://********@host`), and query parameters that carry one
    (`?password=********`, `sslpassword`, `token`, `api_key`...)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    if "@" in authority:
        credentials, _, host = authority.rpartition("@")
        user, colon, _ = credentials.partition(":")
        if colon:
            credentials = f"{user}:********"
        elif scheme.lower() in {"http", "https"}:
            credentials = "********"
        authority = f"{credentials}@{host}"
    path, question, query = tail.partition("?")
    if question:
        query, hash_sign, fragment = query.partition("#")
        pairs = []
        for pair in query.split("&"):
            name, equals, _ = pair.partition("=")
            pairs.append(f"{name}=********" if equals and _SECRET_PARAMETER.search(name) else pair)
        tail = f"{path}?{'&'.join(pairs)}{hash_sign}{fragment}"
    return f"{scheme}://{authority}{tail}"
