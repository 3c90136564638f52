"""Settings for the site itself: its HTTP face, metrics, identity, logs and look."""

from __future__ import annotations

import os
import re
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AnyHttpUrl, Field, SecretStr, field_validator

from tidings.config.base import Section

MIN_SECRET_BYTES = 32
_ORIGIN = re.compile(r"https?://[A-Za-z0-9.-]+(?::\d{1,5})?/?")


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


class HttpSettings(Section):
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


class MetricsSettings(Section):
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


class SiteSettings(Section):
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


class LogSettings(Section):
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


class ThemeSettings(Section):
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
