"""The composition root: settings -> database -> services. Nothing else reads settings.

Entrypoints (the API, the CLI, workers) call `build()` and get a `Container`; nothing is
constructed at import time.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from tidings.access.keys import ApiKeys
from tidings.audience.context import AudienceContext
from tidings.audience.importer import Importer
from tidings.audience.newsletters import Newsletters
from tidings.audience.public import PublicFlows
from tidings.audience.ratelimit import SubscribeLimits, SubscribeRateLimiter
from tidings.audience.subscribers import Subscribers
from tidings.audience.suppression import Suppressions
from tidings.campaigns.drafts import CampaignContext, CampaignDrafts
from tidings.config import QueueSettings, Settings
from tidings.delivery.capture import CapturedMail, CaptureProvider
from tidings.delivery.email_jobs import SEND_EMAIL, EmailJobHandler, Mailer
from tidings.delivery.provider import PerRecipientProvider
from tidings.delivery.smtp import SmtpProvider
from tidings.delivery.webhook_client import WebhookClient
from tidings.delivery.webhooks import DELIVER_WEBHOOK, WebhookJobHandler, Webhooks
from tidings.observability.metrics import Metrics
from tidings.queue.policy import HandlerRegistry, QueuePolicy
from tidings.queue.service import JobQueue
from tidings.rendering import Theme
from tidings.storage import migrate
from tidings.storage.database import Database, create_database
from tidings.storage.health import check_ready
from tidings.storage.site_secrets import get_or_create_secret


def utcnow() -> datetime:
    return datetime.now(UTC)


class SiteSecret:
    """The site secret, loaded by `start()` (from settings, or generated once and kept in the
    database). Services read it lazily, after start-up."""

    def __init__(self) -> None:
        self.value: str | None = None

    def __call__(self) -> str:
        if self.value is None:
            raise RuntimeError("the site secret is not loaded yet: start the container first")
        return self.value


@dataclass
class Container:
    """Everything one process needs, built once from settings."""

    settings: Settings
    db: Database
    metrics: Metrics
    api_keys: ApiKeys
    queue: JobQueue
    webhooks: Webhooks
    captured_mail: CapturedMail
    mailer: Mailer
    site_secret: SiteSecret
    public: PublicFlows
    newsletters: Newsletters
    subscribers: Subscribers
    suppressions: Suppressions
    subscribe_limiter: SubscribeRateLimiter
    campaigns: CampaignDrafts
    importer: Importer
    _closers: list[PerRecipientProvider | WebhookClient] = field(default_factory=list)

    async def close(self) -> None:
        for resource in self._closers:
            if isinstance(resource, WebhookClient):
                await resource.aclose()
            else:
                await resource.close()
        await self.db.dispose()

    async def check_ready(self) -> None:
        """Raise `NotReady` unless the database answers and is migrated (`/readyz`)."""
        await check_ready(self.db)

    def email_provider(self) -> PerRecipientProvider:
        """The configured provider (built on first use: only workers send)."""
        email = self.settings.email
        if email.provider == "capture":
            provider: PerRecipientProvider = CaptureProvider(self.db, utcnow)
        else:
            smtp = self.settings.smtp
            provider = SmtpProvider(
                host=smtp.host,
                port=smtp.port,
                username=smtp.username,
                password=smtp.password.get_secret_value() if smtp.password else None,
                security=smtp.security,
                timeout_seconds=smtp.timeout_seconds,
                pool_size=smtp.pool_size,
                validate_certs=smtp.validate_certs,
            )
        self._closers.append(provider)
        return provider

    def webhook_client(self) -> WebhookClient:
        hooks = self.settings.webhooks
        client = WebhookClient(
            allow_private_networks=hooks.allow_private_networks,
            deadline_seconds=hooks.deadline_seconds,
            max_response_bytes=hooks.max_response_bytes,
            per_host_concurrency=hooks.per_host_concurrency,
        )
        self._closers.append(client)
        return client

    def handler_registry(self) -> HandlerRegistry:
        """Every job kind and its one handler. A second registration of a kind fails here."""
        queue = self.settings.queue
        registry = HandlerRegistry()
        registry.register(
            SEND_EMAIL,
            EmailJobHandler(
                self.email_provider(),
                utcnow,
                deadline_seconds=self.settings.email.send_deadline_seconds,
                domain=self.settings.email.from_address.rpartition("@")[2],
            ),
            concurrency=queue.email_concurrency,
        )
        registry.register(
            DELIVER_WEBHOOK,
            WebhookJobHandler(self.db, self.webhook_client(), utcnow),
            concurrency=queue.webhook_concurrency,
        )
        return registry

    async def run_workers(self, stop: asyncio.Event) -> None:
        """Consume every job kind until `stop` is set, then drain (SIGTERM semantics)."""
        await self.queue.run_workers(
            self.handler_registry(),
            stop,
            on_outcome=self.metrics.record_job_outcome,
            maintenance=[
                self.subscribe_limiter.prune,
                self.captured_mail.prune,
                functools.partial(
                    self.webhooks.prune_deliveries,
                    older_than=timedelta(days=self.settings.queue.retention_days),
                ),
            ],
        )


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


def build(settings: Settings) -> Container:
    db = create_database(
        settings.database.url,
        busy_timeout_ms=settings.database.sqlite_busy_timeout_ms,
        pool_size=settings.database.pool_size,
    )
    queue = JobQueue(db, queue_policy(settings.queue), utcnow)
    overlap = timedelta(hours=settings.webhooks.secret_rotation_overlap_hours)
    webhooks = Webhooks(db, queue, utcnow, rotation_overlap=overlap)
    mailer = Mailer(db, queue)
    site_secret = SiteSecret()
    audience = AudienceContext(
        db=db,
        now=utcnow,
        secret=site_secret,
        mailer=mailer,
        webhooks=webhooks,
        public_url=str(settings.site.public_url).rstrip("/"),
        site_name=settings.site.name,
        confirm_token_ttl_hours=settings.audience.confirm_token_ttl_hours,
    )
    limits = SubscribeLimits(
        per_ip=settings.audience.subscribe_limit_per_ip,
        per_address=settings.audience.subscribe_limit_per_address,
        window_seconds=settings.audience.rate_limit_window_seconds,
    )
    limiter = SubscribeRateLimiter(audience, limits)
    public = PublicFlows(audience, limiter)
    return Container(
        settings=settings,
        db=db,
        metrics=Metrics(),
        api_keys=ApiKeys(db, utcnow),
        queue=queue,
        webhooks=webhooks,
        captured_mail=CapturedMail(
            db, utcnow, retention=timedelta(days=settings.email.capture_retention_days)
        ),
        mailer=mailer,
        site_secret=site_secret,
        public=public,
        newsletters=Newsletters(audience),
        subscribers=Subscribers(audience, public),
        suppressions=Suppressions(audience),
        subscribe_limiter=limiter,
        importer=Importer(audience),
        campaigns=CampaignDrafts(
            CampaignContext(
                db=db,
                now=utcnow,
                mailer=mailer,
                public_url=audience.public_url,
                theme=theme_from(settings),
            )
        ),
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


async def start(container: Container, *, apply_migrations: bool) -> None:
    """Bring the container up: migrate if asked, then load the site secret."""
    if apply_migrations:
        await migrate.upgrade(container.db)
    configured = container.settings.site.secret
    if configured is not None:
        container.site_secret.value = configured.get_secret_value()
    elif await migrate.is_at_head(container.db):
        async with container.db.write() as conn:
            container.site_secret.value = await get_or_create_secret(
                conn, "site", candidate=secrets.token_urlsafe(32), now=utcnow()
            )


@asynccontextmanager
async def running(settings: Settings, *, apply_migrations: bool) -> AsyncIterator[Container]:
    container = build(settings)
    try:
        await start(container, apply_migrations=apply_migrations)
        yield container
    finally:
        await container.close()
