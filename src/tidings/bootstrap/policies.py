"""Settings turned into the engine's policies: queue timing, sending, auto-pause, the theme."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from tidings.campaigns.context import SendPolicy
from tidings.config import (
    QueueSettings,
    Settings,
)
from tidings.domain.auto_pause import AutoPausePolicy
from tidings.queue.policy import QueuePolicy
from tidings.rendering import Theme

if TYPE_CHECKING:
    pass


def queue_policy(queue: QueueSettings) -> QueuePolicy:
    """The queue's timing, from settings: the defaults are defined there, once."""
    return QueuePolicy(
        lease_seconds=queue.lease_seconds,
        poll_interval_seconds=queue.poll_interval_seconds,
        max_attempts=queue.max_attempts,
        backoff_base_seconds=queue.backoff_base_seconds,
        backoff_max_seconds=queue.backoff_max_seconds,
        shutdown_grace_seconds=queue.shutdown_grace_seconds,
        prune_interval_seconds=queue.prune_interval_seconds,
        retention_days=queue.retention_days,
    )


def auto_pause_policy(settings: Settings) -> AutoPausePolicy:
    bulk = settings.bulk_email
    return AutoPausePolicy(
        hard_bounce_rate=bulk.auto_pause_hard_bounce_rate,
        hard_bounce_sample=bulk.auto_pause_hard_bounce_sample,
        complaint_rate=bulk.auto_pause_complaint_rate,
        complaint_sample=bulk.auto_pause_complaint_sample,
    )


def send_policy(settings: Settings) -> SendPolicy:
    bulk = settings.bulk_email
    batch_size = bulk.batch_size
    spread = None
    sending_domain = None
    if settings.email.provider == "mailgun":
        sending_domain = settings.mailgun.domain
        batch_size = min(batch_size, settings.mailgun.max_batch_size)  # never above its maximum
        minutes = settings.mailgun.delivery_time_spread_minutes
        spread = timedelta(minutes=minutes) if minutes else None
    return SendPolicy(
        batch_size=batch_size,
        delivery_spread=spread,
        sending_domain=sending_domain,
        batch_creation_concurrency=bulk.batch_creation_concurrency,
        warming_domain=bulk.warming_domain,
        warming_daily_capacity=bulk.warming_daily_capacity,
    )


def theme_from(settings: Settings) -> Theme:
    """The one theme (CMP-2): the design system's defaults with the configured brand."""
    theme = settings.theme
    return Theme(
        site_name=settings.site.name,
        postal_address=theme.postal_address,
        logo_url=theme.logo_url,
        accent_color=theme.accent_color,
        body_font=theme.body_font,
        heading_font=theme.heading_font,
    )
