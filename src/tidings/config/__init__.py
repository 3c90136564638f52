"""Settings: every configuration key, typed, described and validated (SPEC CFG-1).

Keys are grouped in sections. A key `section.name` is set by the environment variable
`TIDINGS_SECTION_NAME` or by `name = ...` under `[section]` in a TOML file given with
`--config` (or `TIDINGS_CONFIG`). The environment wins over the file; defaults make
`tidings serve` work with no configuration at all.

The schema is split by concern (`storage`, `site`, `access`, `delivery`, `bulk_email`,
`inbound`, assembled in `settings`), with its reusable types in `annotated`; `loader` reads
it and `display` shows it. This module is the package's face: import from here.
"""

from tidings.config.access import AdminUiSettings, AudienceSettings, PrivacySettings
from tidings.config.base import ENV_PREFIX
from tidings.config.bulk_email import BulkEmailSettings
from tidings.config.delivery import (
    DkimSettings,
    EmailSettings,
    FeedSettings,
    MailgunSettings,
    SmtpSettings,
    WebhookSettings,
)
from tidings.config.display import format_duration, iter_keys, mask_url_password, masked
from tidings.config.inbound import InboundSettings, SesSettings
from tidings.config.loader import (
    CONFIG_FILE_ENV,
    ConfigurationError,
    describe_validation_error,
    load_settings,
    setting_origins,
)
from tidings.config.settings import IDENTITY_KEYS, Settings, placeholder_identity
from tidings.config.site import (
    HttpSettings,
    LogSettings,
    MetricsSettings,
    SiteSettings,
    ThemeSettings,
)
from tidings.config.storage import DatabaseSettings, MediaSettings, QueueSettings
from tidings.config.tracking import TrackingSettings

__all__ = [
    "CONFIG_FILE_ENV",
    "ENV_PREFIX",
    "IDENTITY_KEYS",
    "AdminUiSettings",
    "AudienceSettings",
    "BulkEmailSettings",
    "ConfigurationError",
    "DatabaseSettings",
    "DkimSettings",
    "EmailSettings",
    "FeedSettings",
    "HttpSettings",
    "InboundSettings",
    "LogSettings",
    "MailgunSettings",
    "MediaSettings",
    "MetricsSettings",
    "PrivacySettings",
    "QueueSettings",
    "SesSettings",
    "Settings",
    "SiteSettings",
    "SmtpSettings",
    "ThemeSettings",
    "TrackingSettings",
    "WebhookSettings",
    "describe_validation_error",
    "format_duration",
    "iter_keys",
    "load_settings",
    "mask_url_password",
    "masked",
    "placeholder_identity",
    "setting_origins",
]
