"""`Container`: everything one process needs, built once from settings by `build()`."""

from __future__ import annotations

import asyncio
import functools
import ssl
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import structlog

from tidings.access.admins import AdminAccounts
from tidings.access.audit import AuditLog
from tidings.access.keys import ApiKeys
from tidings.audience.bot_check import BotCheck
from tidings.audience.bulk import BulkActions
from tidings.audience.confirm_pending import PendingConfirmations
from tidings.audience.context import AudienceContext
from tidings.audience.hearing.inbound_mail import InboundMail
from tidings.audience.hearing.intake import ProviderEvents
from tidings.audience.hearing.recording import Feedback
from tidings.audience.importer import Importer
from tidings.audience.memberships import Memberships
from tidings.audience.newsletters import Newsletters
from tidings.audience.public import PublicFlows
from tidings.audience.ratelimit import SubscribeRateLimiter
from tidings.audience.stats import AudienceStats
from tidings.audience.subscribers import Subscribers
from tidings.audience.sunset import SunsetPolicy
from tidings.audience.suppression import Suppressions
from tidings.bootstrap.handlers import handler_registry
from tidings.bootstrap.keys import SiteSecret, SuppressionKey
from tidings.bootstrap.providers import (
    configured_email_provider,
    configured_webhook_client,
    mailgun_provider,
)
from tidings.campaigns.ab_tests import AbTests
from tidings.campaigns.archive import PublicArchive
from tidings.campaigns.checks import PresendChecks
from tidings.campaigns.context import SendingContext
from tidings.campaigns.control import SendControl
from tidings.campaigns.drafts import CampaignDrafts
from tidings.campaigns.feeds.service import Feeds
from tidings.campaigns.feeds.step import FeedStep, RetryPolicy
from tidings.campaigns.lifecycle import CampaignLifecycle
from tidings.campaigns.listing import CampaignListing
from tidings.campaigns.media import MediaLibrary
from tidings.campaigns.reconcile import Reconciler
from tidings.campaigns.recovery import SendRecovery
from tidings.campaigns.retry import SendRetries
from tidings.campaigns.send_again import SendAgain
from tidings.campaigns.send_status import SendStatusReader
from tidings.campaigns.statistics import StatisticsReader
from tidings.campaigns.submit.per_batch import PerBatchSubmit
from tidings.campaigns.submit.per_recipient import PerRecipientSubmit
from tidings.campaigns.submit.strategy import SubmitStrategy
from tidings.config import (
    Settings,
)
from tidings.delivery.feed_client import FeedClient
from tidings.delivery.imap_mailbox import MailboxAccount
from tidings.delivery.mailgun import MailgunProvider
from tidings.delivery.provider import PerRecipientProvider
from tidings.delivery.webhook_client import WebhookClient
from tidings.domain import verp
from tidings.domain.audit import Actor
from tidings.domain.clock import Clock
from tidings.domain.feeds import parse_zone
from tidings.domain.identity import SendingIdentity
from tidings.engagement.activity import PersonActivity
from tidings.engagement.apply import EngagementApplier
from tidings.engagement.intake import Intake
from tidings.engagement.results import EngagementResults
from tidings.observability.metrics import Metrics
from tidings.outbound.capture import CapturedMail
from tidings.outbound.domain_rates import DomainRates
from tidings.outbound.email_jobs import Mailer
from tidings.outbound.message_outcomes import MessageOutcomes
from tidings.outbound.send_rate import SendRateLimiter
from tidings.outbound.webhooks import Webhooks
from tidings.queue.policy import HandlerRegistry
from tidings.queue.service import JobQueue, Periodic
from tidings.rendering import Pages, TemplateEngine
from tidings.storage.database import Database
from tidings.storage.health import check_ready

if TYPE_CHECKING:
    from tidings.delivery.inbound_server import InboundServer

log = structlog.get_logger("tidings.bootstrap")
APPLY_INTERVAL_SECONDS = 1.0  # how often the workers fold taken-in hits into the counters


@dataclass
class Container:
    """Everything one process needs, built once from settings. It owns what it holds: the
    database, and the providers (given to `build` or built on first use), all closed by
    `close()` through one exit stack."""

    settings: Settings
    clock: Clock
    db: Database
    metrics: Metrics
    templates: TemplateEngine
    pages: Pages
    api_keys: ApiKeys
    admins: AdminAccounts
    audit: AuditLog
    queue: JobQueue
    webhooks: Webhooks
    captured_mail: CapturedMail
    message_outcomes: MessageOutcomes
    mailer: Mailer
    site_secret: SiteSecret
    audience: AudienceContext
    suppression_key: SuppressionKey
    public: PublicFlows
    newsletters: Newsletters
    subscribers: Subscribers
    memberships: Memberships
    bulk: BulkActions
    audience_stats: AudienceStats
    activity: PersonActivity  # a person's opens and clicks (ENG-6)
    suppressions: Suppressions
    subscribe_limiter: SubscribeRateLimiter
    campaigns: CampaignDrafts
    checks: PresendChecks  # warnings before a send (CMP-8)
    sending: SendingContext
    sends: CampaignLifecycle
    send_status: SendStatusReader
    statistics: StatisticsReader
    engagement_results: EngagementResults  # a campaign's opens and clicks (ENG-5)
    ab_tests: AbTests  # decisions and figures of A/B tests (ENG-8)
    intake: Intake  # hits taken in by /c/ and /o/ (ENG-3)
    engagement_applier: EngagementApplier  # folds them into the counters (ENG-3, ENG-5)
    listing: CampaignListing
    send_again: SendAgain  # a sent campaign again, to a frozen part of its recipients (ENG-7)
    retries: SendRetries
    reconciler: Reconciler
    control: SendControl
    importer: Importer
    identity: SendingIdentity
    pending_confirmations: PendingConfirmations
    feedback: Feedback
    provider_events: ProviderEvents
    inbound_mail: InboundMail
    bounce_mailbox: MailboxAccount | None  # polled by `tidings inbound --imap`
    archive: PublicArchive
    media: MediaLibrary  # uploaded images (CMP-6)
    bot_check: BotCheck
    resources: AsyncExitStack
    _email_provider: PerRecipientProvider | None = None
    _webhook_client: WebhookClient | None = None
    _feed_client: FeedClient | None = None
    _batch_providers: dict[str, MailgunProvider] = field(default_factory=dict)

    async def close(self) -> None:
        await self.resources.aclose()

    async def check_ready(self) -> None:
        """Raise `NotReady` unless the database answers and is migrated (`/readyz`)."""
        await check_ready(self.db)

    def email_provider(self) -> PerRecipientProvider:
        """The provider given to `build`, else the configured one, built on first use (only
        workers send); either way once, and closed with the container."""
        if self._email_provider is None:
            self._email_provider = configured_email_provider(self.settings, self.db, self.clock)
            self.resources.push_async_callback(self._email_provider.close)
        return self._email_provider

    def inbound_server(self, *, host: str, port: int, lmtp: bool) -> InboundServer:
        """`tidings inbound`'s receiver, with the limits and STARTTLS certificate of
        inbound.* (aiosmtpd is imported only by the process that runs it)."""
        from tidings.delivery.inbound_server import InboundServer, SessionLimits

        inbound = self.settings.inbound
        tls_context = None
        if inbound.tls_certificate_file is not None and inbound.tls_key_file is not None:
            tls_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            tls_context.load_cert_chain(inbound.tls_certificate_file, inbound.tls_key_file)
        return InboundServer(
            accepts=self.inbound_mail.accepts,
            deliver=self.inbound_mail.receive,
            host=host,
            port=port,
            lmtp=lmtp,
            max_bytes=self.inbound_mail.max_bytes,
            limits=SessionLimits(
                max_recipients=inbound.max_recipients,
                max_connections=inbound.max_connections,
                max_connections_per_client=inbound.max_connections_per_client,
                idle_timeout_seconds=inbound.idle_timeout_seconds,
                session_timeout_seconds=inbound.session_timeout_seconds,
            ),
            tls_context=tls_context,
        )

    def submit_strategy(self) -> SubmitStrategy[Any]:
        """How campaign batches reach the provider: one call per batch for a batch API,
        recipient by recipient for SMTP and the local capture."""
        bulk = self.settings.bulk_email
        if self.settings.email.provider == "mailgun":
            mailgun = self.settings.mailgun
            built = self._batch_providers

            def provider_for(domain: str) -> MailgunProvider:
                # The configured domain, or the warming domain (SND-5): one client each.
                if domain != bulk.warming_domain:
                    domain = str(mailgun.domain)
                if domain not in built:
                    built[domain] = mailgun_provider(mailgun, domain)
                    self.resources.push_async_callback(built[domain].close)
                return built[domain]

            return PerBatchSubmit(
                provider_for,
                deadline_seconds=mailgun.timeout_seconds + 5,
                limiter=self.send_rate_limiter(),
            )
        provider = self.email_provider()
        bounce_address = self.settings.inbound.bounce_address
        return PerRecipientSubmit(
            provider,
            chunk=bulk.in_flight_chunk,
            concurrency=bulk.submission_concurrency,
            retries=bulk.recipient_retries,
            # The SMTP provider keeps its own deadline: it knows whether DATA went out, and
            # starts the clock only once it holds a pooled connection (PRV-1); DKIM signing
            # wraps it and keeps that so.
            deadline_seconds=None
            if self.settings.email.provider == "smtp"
            else self.settings.email.send_deadline_seconds,
            limiter=self.send_rate_limiter(),
            domain_rates=self.domain_rates(),
            return_path=(
                None
                if bounce_address is None
                else lambda recipient_id: verp.return_path(
                    bounce_address, self.site_secret(), recipient_id
                )
            ),
        )

    def domain_rates(self) -> DomainRates:
        """The configured per-recipient-domain rates, shared by every worker (SND-25)."""
        bulk = self.settings.bulk_email
        return DomainRates(
            self.db, bulk.domain_rates, cool_down_seconds=bulk.domain_rate_cool_down_seconds
        )

    def send_rate_limiter(self) -> SendRateLimiter:
        """The configured provider's send rate, shared by every worker (PRV-5). Unlimited
        (rate 0) still obeys a provider's 429 cool-down, read about once a second."""
        rate = self.settings.bulk_email.send_rate_per_second
        limiter = SendRateLimiter(self.db, self.settings.email.provider, rate_per_second=rate)
        self.resources.push_async_callback(limiter.close)
        return limiter

    def webhook_client(self) -> WebhookClient:
        """Like `email_provider`: given or configured, built once, closed with the container."""
        if self._webhook_client is None:
            self._webhook_client = configured_webhook_client(self.settings, self.clock)
            self.resources.push_async_callback(self._webhook_client.aclose)
        return self._webhook_client

    def feed_client(self) -> FeedClient:
        """The client that reads followed feeds (AUT-2), built on first use, closed with the
        container; private networks as `webhooks.allow_private_networks` says."""
        if self._feed_client is None:
            feeds = self.settings.feeds
            self._feed_client = FeedClient(
                allow_private_networks=self.settings.webhooks.allow_private_networks,
                timeout_seconds=feeds.timeout_seconds,
                max_bytes=feeds.max_bytes,
                max_redirects=feeds.max_redirects,
            )
            self.resources.push_async_callback(self._feed_client.aclose)
        return self._feed_client

    @functools.cached_property
    def feeds(self) -> Feeds:
        """Feed-to-email (AUT-2): following, the digest step and its jobs. Schedules are
        read in the site's time zone (`site.timezone`)."""
        feeds = self.settings.feeds
        step = FeedStep(
            queue=self.queue,
            client=self.feed_client,
            environment=self.templates.environment,
            zone=parse_zone(self.settings.site.timezone),
            retry=RetryPolicy(feeds.retry_seconds, feeds.retry_max_seconds),
        )
        return Feeds(
            self.db,
            self.queue,
            self.clock,
            step,
            self.feed_client,
            allow_private_networks=self.settings.webhooks.allow_private_networks,
            send=self.sends.send,
        )

    def handler_registry(self) -> HandlerRegistry:
        """Every job kind and its one handler (`bootstrap/handlers.py`)."""
        return handler_registry(self)

    @functools.cached_property
    def sunset(self) -> SunsetPolicy:
        """The sunset policy (ENG-7), one per process (it keeps each newsletter's place);
        every run that did something is in the audit log with its counts."""

        async def report(newsletter_id: int, counts: dict[str, int]) -> None:
            await self.audit.record(
                Actor("system"), "sunset.run", f"newsletter:{newsletter_id}", counts
            )

        tracking = self.settings.tracking
        return SunsetPolicy(
            self.audience,
            batch=tracking.sunset_batch,
            retention_days=int(tracking.retention_days),
            report=report,
        )

    def send_recovery(self) -> SendRecovery:
        """Finds interrupted sends and hands them back to the send handler (SND-20, SND-22)."""
        return SendRecovery(self.sending, max_age=self.settings.bulk_email.resume_max_age)

    async def run_workers(self, stop: asyncio.Event) -> None:
        """Consume every job kind until `stop` is set, then drain (SIGTERM semantics). Sends
        interrupted earlier are resumed at start, and the sweep looks again on its interval."""
        if self.identity.real_provider and self.identity.placeholders:
            # Sends are refused under it; confirmation emails (a reader asked) still go out.
            log.warning(
                "config.placeholder_identity",
                provider=self.settings.email.provider,
                settings=[key.split()[0] for key in self.identity.placeholders],
            )
        await self.queue.run_workers(
            self.handler_registry(),
            stop,
            on_outcome=self.metrics.record_job_outcome,
            maintenance=[
                self.subscribe_limiter.prune,
                self.captured_mail.prune,
                self.admins.prune,
                self.feedback.purge,
                self.audit.purge,
                self.activity.purge,
                functools.partial(
                    self.webhooks.prune_deliveries,
                    older_than=timedelta(days=self.settings.queue.retention_days),
                ),
            ],
            periodic=[
                Periodic(
                    "send_sweep",
                    self.settings.bulk_email.sweep_interval_seconds,
                    self.send_recovery().sweep,
                ),
                Periodic("apply_engagement", APPLY_INTERVAL_SECONDS, self.engagement_applier.apply),
                Periodic("sunset", self.settings.tracking.sunset_interval_seconds, self.sunset.run),
                Periodic(
                    "queue_due_feeds",
                    self.settings.feeds.check_interval_seconds,
                    self.feeds.queue_due,
                ),
                Periodic(
                    "count_statistics",
                    self.settings.bulk_email.statistics_interval_seconds,
                    self.statistics.recount,
                ),
            ],
        )
