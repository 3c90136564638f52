"""Settings for who may get in: signup limits, the admin UI's sign-in, the address-hashing key."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator

from tidings.config.base import Section


class AudienceSettings(Section):
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


class PrivacySettings(Section):
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


class AdminUiSettings(Section):
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
