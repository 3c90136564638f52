"""The whole configuration: every section in its place, and the rules that span sections."""

from __future__ import annotations

from pathlib import Path

from pydantic import PrivateAttr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tidings.config.ab import AbSettings
from tidings.config.access import AdminUiSettings, AudienceSettings, PrivacySettings
from tidings.config.base import ENV_PREFIX, env_var
from tidings.config.bulk_email import BulkEmailSettings
from tidings.config.delivery import (
    DkimSettings,
    EmailSettings,
    FeedSettings,
    MailgunSettings,
    SmtpSettings,
    WebhookSettings,
)
from tidings.config.inbound import InboundSettings, SesSettings
from tidings.config.site import (
    HttpSettings,
    LogSettings,
    MetricsSettings,
    SiteSettings,
    ThemeSettings,
)
from tidings.config.storage import DatabaseSettings, MediaSettings, QueueSettings
from tidings.config.tracking import TrackingSettings


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
    feeds: FeedSettings = FeedSettings()
    inbound: InboundSettings = InboundSettings()
    ses: SesSettings = SesSettings()
    tracking: TrackingSettings = TrackingSettings()
    ab: AbSettings = AbSettings()
    audience: AudienceSettings = AudienceSettings()
    privacy: PrivacySettings = PrivacySettings()
    theme: ThemeSettings = ThemeSettings()
    admin_ui: AdminUiSettings = AdminUiSettings()
    media: MediaSettings = MediaSettings()
    # Where the values came from (the settings page): the file read and the keys given in code.
    # The sources and their precedence are the loader's (load_settings).
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
            found.append(f"{key} ({env_var(key)})")
    return tuple(found)


def _needed_for_mailgun(key: str) -> str:
    return f"{key} ({env_var(key)}) must be set when email.provider is mailgun"
