"""The composition root: settings -> database -> services. Nothing else reads settings.

Entrypoints (the API, the CLI, workers) call `build()` and get a `Container`; nothing is
constructed at import time.
"""

from __future__ import annotations

import asyncio
import functools
import os
import secrets
import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
import structlog

from tidings.access.admins import AdminAccounts, SessionPolicy
from tidings.access.audit import AuditLog
from tidings.access.keys import ApiKeys
from tidings.access.passwords import PasswordHashing
from tidings.access.sign_in_limits import SignInLimiter, SignInLimits
from tidings.access.two_factor import TwoFactor
from tidings.audience.bot_check import BotCheck
from tidings.audience.bulk import BulkActions, BulkRequest
from tidings.audience.confirm_pending import PendingConfirmations
from tidings.audience.consent_requests import REQUEST_CONSENT, ConsentRequestHandler
from tidings.audience.context import AudienceContext
from tidings.audience.hearing.inbound_mail import InboundMail
from tidings.audience.hearing.intake import ProviderEvents
from tidings.audience.hearing.recording import Feedback
from tidings.audience.importer import Importer
from tidings.audience.newsletters import Newsletters
from tidings.audience.public import PublicFlows
from tidings.audience.ratelimit import SubscribeLimits, SubscribeRateLimiter
from tidings.audience.stats import AudienceStats
from tidings.audience.subscriber_mail import SEND_SUBSCRIBER_EMAIL, SubscriberMailHandler
from tidings.audience.subscribers import Subscribers
from tidings.audience.suppression import Suppressions
from tidings.audience.suppression_key import adopt_suppression_key
from tidings.campaigns.archive import PublicArchive
from tidings.campaigns.auto_pause import AutoPause
from tidings.campaigns.context import SendingContext, SendPolicy
from tidings.campaigns.control import SendControl
from tidings.campaigns.drafts import CampaignContext, CampaignDrafts
from tidings.campaigns.jobs.finalise_campaign import FinaliseCampaignHandler
from tidings.campaigns.jobs.payloads import FINALISE_CAMPAIGN, SEND_BATCH, SEND_CAMPAIGN
from tidings.campaigns.jobs.send_batch import SendBatchHandler
from tidings.campaigns.jobs.send_campaign import SendCampaignHandler
from tidings.campaigns.lifecycle import CampaignLifecycle
from tidings.campaigns.listing import CampaignListing
from tidings.campaigns.reconcile import Reconciler
from tidings.campaigns.recovery import SendRecovery
from tidings.campaigns.retry import SendRetries
from tidings.campaigns.send_status import SendStatusReader
from tidings.campaigns.statistics import StatisticsReader
from tidings.campaigns.submit.per_batch import PerBatchSubmit
from tidings.campaigns.submit.per_recipient import PerRecipientSubmit
from tidings.campaigns.submit.strategy import SubmitStrategy
from tidings.config import (
    MailgunSettings,
    PrivacySettings,
    QueueSettings,
    Settings,
    SmtpSettings,
    mask_url_password,
    placeholder_identity,
)
from tidings.delivery.connection_check import ConnectionCheck, check_mailgun, check_smtp
from tidings.delivery.dkim_signer import DkimSigner, DkimSigningProvider
from tidings.delivery.imap_mailbox import MailboxAccount
from tidings.delivery.mailgun import MailgunProvider
from tidings.delivery.provider import PerRecipientProvider
from tidings.delivery.smtp import SmtpProvider
from tidings.delivery.sns import SnsCertificates
from tidings.delivery.webhook_client import WebhookClient
from tidings.domain import verp
from tidings.domain.audit import Actor
from tidings.domain.auto_pause import AutoPausePolicy
from tidings.domain.clock import Clock
from tidings.domain.errors import InvalidInput
from tidings.domain.feedback import BouncePolicy
from tidings.domain.identity import SendingIdentity
from tidings.observability.metrics import Metrics
from tidings.outbound.capture import CapturedMail, CaptureProvider
from tidings.outbound.domain_rates import DomainRates
from tidings.outbound.email_jobs import SEND_EMAIL, EmailJobHandler, Mailer
from tidings.outbound.message_outcomes import MessageOutcomes
from tidings.outbound.send_rate import SendRateLimiter
from tidings.outbound.webhooks import DELIVER_WEBHOOK, WebhookJobHandler, Webhooks
from tidings.queue.policy import HandlerRegistry, QueuePolicy
from tidings.queue.service import JobQueue, Periodic
from tidings.rendering import Pages, TemplateEngine, Theme
from tidings.storage import migrate, revision
from tidings.storage.database import Database, create_database
from tidings.storage.health import check_ready
from tidings.storage.site_secrets import get_or_create_secret

if TYPE_CHECKING:
    from tidings.delivery.inbound_server import InboundServer

log = structlog.get_logger("tidings.bootstrap")


def utcnow() -> datetime:
    """The production clock: the one place that reads the time (HOUSE rule 2)."""
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


class SuppressionKey:
    """The suppression key from outside the database (privacy.suppression_key or its file),
    loaded by `start()`; None when not configured (the site secret alone keys the hashes)."""

    def __init__(self) -> None:
        self.value: str | None = None

    def __call__(self) -> str | None:
        return self.value


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
    bulk: BulkActions
    audience_stats: AudienceStats
    suppressions: Suppressions
    subscribe_limiter: SubscribeRateLimiter
    campaigns: CampaignDrafts
    sending: SendingContext
    sends: CampaignLifecycle
    send_status: SendStatusReader
    statistics: StatisticsReader
    listing: CampaignListing
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
    bot_check: BotCheck
    resources: AsyncExitStack
    _email_provider: PerRecipientProvider | None = None
    _webhook_client: WebhookClient | None = None
    _batch_providers: dict[str, MailgunProvider] = field(default_factory=dict)

    async def apply_bulk(self, request: BulkRequest, actor: Actor) -> int:
        """A bulk action on subscribers, recorded in the audit log with its count (the API
        and the admin UI both come here, so neither can forget the record)."""
        changed = await self.bulk.apply(request)
        selection = request.selection
        await self.audit.record(
            actor,
            f"subscribers.bulk_{request.action.value}",
            detail={
                "count": changed,
                "label": request.label,
                "newsletter": request.newsletter,
                "picked": None if selection.picked is None else len(selection.picked),
                "filter": {
                    "newsletter": selection.newsletter,
                    "state": selection.state.value if selection.state else None,
                    "tier": selection.tier,
                    "label": selection.label,
                    "text": bool(selection.text),  # the search text may be an address
                },
            },
        )
        return changed

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

    def handler_registry(self) -> HandlerRegistry:
        """Every job kind and its one handler. A second registration of a kind fails here."""
        queue = self.settings.queue
        registry = HandlerRegistry()
        bounce_address = self.settings.inbound.bounce_address
        email_sender = EmailJobHandler(
            self.email_provider(),
            self.clock,
            deadline_seconds=self.settings.email.send_deadline_seconds,
            domain=self.settings.email.from_address.rpartition("@")[2],
            return_path=None
            if bounce_address is None
            else lambda job_id: verp.mail_return_path(bounce_address, self.site_secret(), job_id),
        )
        registry.register(SEND_EMAIL, email_sender, concurrency=queue.email_concurrency)
        registry.register(
            SEND_SUBSCRIBER_EMAIL,
            SubscriberMailHandler(self.audience, email_sender),
            concurrency=queue.email_concurrency,
        )
        registry.register(
            REQUEST_CONSENT,
            ConsentRequestHandler(self.audience),
            concurrency=queue.email_concurrency,
        )
        bulk = self.settings.bulk_email
        # Long jobs: they renew their lease while they work instead of running under a deadline.
        registry.register(
            SEND_CAMPAIGN, SendCampaignHandler(self.sending), concurrency=1, renew_lease=True
        )
        registry.register(
            SEND_BATCH,
            SendBatchHandler(
                self.sending,
                self.submit_strategy(),
                worker=f"{socket.gethostname()}:{os.getpid()}",
                domain_rates=self.domain_rates(),
            ),
            concurrency=bulk.concurrency,
            renew_lease=True,
        )
        registry.register(
            FINALISE_CAMPAIGN,
            FinaliseCampaignHandler(self.sending),
            concurrency=1,
            renew_lease=True,
        )
        registry.register(
            DELIVER_WEBHOOK,
            WebhookJobHandler(self.queue, self.webhook_client, self.clock),
            concurrency=queue.webhook_concurrency,
        )
        return registry

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
                )
            ],
        )


def configured_email_provider(
    settings: Settings, db: Database, clock: Clock
) -> PerRecipientProvider:
    """The configured provider, signing with DKIM first when `dkim` is set (PRV-7)."""
    provider = unsigned_email_provider(settings, db, clock)
    dkim = settings.dkim
    if dkim.selector and dkim.domain and dkim.private_key_file:
        signer = DkimSigner.from_file(
            selector=dkim.selector,
            domain=dkim.domain,
            path=dkim.private_key_file,
            expiry=dkim.expiry,
        )
        return DkimSigningProvider(provider, signer)
    return provider


def unsigned_email_provider(settings: Settings, db: Database, clock: Clock) -> PerRecipientProvider:
    if settings.email.provider == "capture":
        return CaptureProvider(db, clock)
    if settings.email.provider == "mailgun":
        mailgun = settings.mailgun
        return mailgun_provider(mailgun, str(mailgun.domain))  # messages.mime, one by one
    smtp = settings.smtp
    return SmtpProvider(
        host=smtp.host,
        port=smtp.port,
        username=smtp.username,
        password=smtp.password.get_secret_value() if smtp.password else None,
        security=smtp.security,
        timeout_seconds=smtp.timeout_seconds,
        pool_size=smtp.pool_size,
        validate_certs=smtp.validate_certs,
        deadline_seconds=settings.email.send_deadline_seconds,
    )


async def check_smtp_relay(smtp: SmtpSettings) -> ConnectionCheck:
    """Connect to the relay of `smtp` and walk its steps (`tidings smtp check`)."""
    return await check_smtp(
        host=smtp.host,
        port=smtp.port,
        security=smtp.security,
        username=smtp.username,
        password=smtp.password.get_secret_value() if smtp.password else None,
        timeout_seconds=smtp.timeout_seconds,
        validate_certs=smtp.validate_certs,
    )


async def check_mailgun_account(mailgun: MailgunSettings) -> ConnectionCheck:
    """Read the sending domain with the key of `mailgun` (`tidings mailgun check`)."""
    if mailgun.api_key is None or mailgun.domain is None:
        missing = "mailgun.api_key" if mailgun.api_key is None else "mailgun.domain"
        raise InvalidInput(f"{missing} is not set", field=missing)
    return await check_mailgun(
        api_key=mailgun.api_key.get_secret_value(),
        domain=mailgun.domain,
        base_url=str(mailgun.api_base_url),
        timeout_seconds=mailgun.timeout_seconds,
    )


async def check_email_provider(settings: Settings) -> ConnectionCheck | None:
    """Check the configured provider's connection; None for the local capture provider, which
    has nothing to connect to."""
    if settings.email.provider == "smtp":
        return await check_smtp_relay(settings.smtp)
    if settings.email.provider == "mailgun":
        return await check_mailgun_account(settings.mailgun)
    return None


def configured_webhook_client(settings: Settings, clock: Clock) -> WebhookClient:
    hooks = settings.webhooks
    return WebhookClient(
        clock=clock,
        allow_private_networks=hooks.allow_private_networks,
        deadline_seconds=hooks.deadline_seconds,
        max_response_bytes=hooks.max_response_bytes,
        per_host_concurrency=hooks.per_host_concurrency,
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


def build(
    settings: Settings,
    *,
    clock: Clock = utcnow,
    email_provider: PerRecipientProvider | None = None,
    webhook_client: WebhookClient | None = None,
) -> Container:
    """Wire every part from `settings`. Production defaults: the real clock, and the
    configured email provider and webhook client (built on first use). Tests pass their own;
    whatever is passed is the container's to close. Building connects to nothing."""
    resources = AsyncExitStack()
    db = create_database(
        settings.database.url,
        busy_timeout_ms=settings.database.sqlite_busy_timeout_ms,
        pool_size=settings.database.pool_size,
        shown_url=mask_url_password(settings.database.url),
    )
    resources.push_async_callback(db.dispose)  # last: the stack closes in reverse
    for given in (email_provider, webhook_client):
        if isinstance(given, WebhookClient):
            resources.push_async_callback(given.aclose)
        elif given is not None:
            resources.push_async_callback(given.close)
    templates = TemplateEngine()
    queue = JobQueue(db, queue_policy(settings.queue), clock)
    overlap = timedelta(hours=settings.webhooks.secret_rotation_overlap_hours)
    webhooks = Webhooks(
        db,
        queue,
        clock,
        rotation_overlap=overlap,
        allow_private_networks=settings.webhooks.allow_private_networks,
    )
    mailer = Mailer(db, queue)
    site_secret = SiteSecret()
    suppression_key = SuppressionKey()
    audience = AudienceContext(
        db=db,
        now=clock,
        secret=site_secret,
        email_hash_key=suppression_key,
        mailer=mailer,
        webhooks=webhooks,
        queue=queue,
        public_url=str(settings.site.public_url).rstrip("/"),
        site_name=settings.site.name,
        confirm_token_ttl_hours=settings.audience.confirm_token_ttl_hours,
        templates=templates,
        theme=theme_from(settings),
    )
    limits = SubscribeLimits(
        per_ip=settings.audience.subscribe_limit_per_ip,
        per_address=settings.audience.subscribe_limit_per_address,
        window_seconds=settings.audience.rate_limit_window_seconds,
    )
    limiter = SubscribeRateLimiter(audience, limits)
    identity = SendingIdentity(
        real_provider=settings.email.provider != "capture",
        placeholders=placeholder_identity(settings),
    )
    public = PublicFlows(audience, limiter)
    subscribers = Subscribers(audience, public)
    campaign_context = CampaignContext(
        db=db,
        now=clock,
        mailer=mailer,
        public_url=audience.public_url,
        theme=theme_from(settings),
        templates=templates,
        identity=identity,
        unsubscribe_address=settings.email.unsubscribe_address,
    )
    campaigns = CampaignDrafts(campaign_context)
    sending = SendingContext(
        db=db,
        queue=queue,
        now=clock,
        drafts=campaigns,
        webhooks=webhooks,
        secret=site_secret,
        policy=send_policy(settings),
    )
    audit = AuditLog(db, clock, retention=timedelta(days=settings.admin_ui.audit_retention_days))
    metrics = Metrics()
    inbound = settings.inbound
    control = SendControl(sending)
    auto_pause = AutoPause(sending, control, auto_pause_policy(settings))
    feedback = Feedback(
        audience,
        public,
        BouncePolicy(
            soft_bounce_limit=inbound.soft_bounce_limit,
            soft_bounce_window=timedelta(days=inbound.soft_bounce_window_days),
        ),
        retention=timedelta(days=inbound.retention_days),
        on_event=metrics.record_inbound_event,
        watch_campaign=auto_pause.check,
    )
    resources.push_async_callback(feedback.close)
    return Container(
        settings=settings,
        clock=clock,
        db=db,
        metrics=metrics,
        templates=templates,
        pages=Pages(theme_from(settings), engine=templates),
        api_keys=ApiKeys(db, clock, audit),
        admins=admin_accounts(settings, db, clock, site_secret, audit),
        audit=audit,
        queue=queue,
        webhooks=webhooks,
        captured_mail=CapturedMail(
            db, clock, retention=timedelta(days=settings.email.capture_retention_days)
        ),
        message_outcomes=MessageOutcomes(db),
        mailer=mailer,
        site_secret=site_secret,
        audience=audience,
        suppression_key=suppression_key,
        public=public,
        newsletters=Newsletters(audience),
        subscribers=subscribers,
        bulk=BulkActions(audience, public, subscribers),
        audience_stats=AudienceStats(audience),
        suppressions=Suppressions(audience),
        subscribe_limiter=limiter,
        importer=Importer(audience),
        identity=identity,
        pending_confirmations=PendingConfirmations(audience),
        feedback=feedback,
        inbound_mail=InboundMail(
            feedback,
            public,
            clock=clock,
            secret=site_secret,
            bounce_address=inbound.bounce_address,
            unsubscribe_address=settings.email.unsubscribe_address,
            max_bytes=inbound.max_event_bytes,
            act_on_unverified=inbound.act_on_unverified_reports,
        ),
        bounce_mailbox=_bounce_mailbox(settings),
        provider_events=ProviderEvents(
            feedback,
            mailgun_signing_key=(
                settings.mailgun.webhook_signing_key.get_secret_value()
                if settings.mailgun.webhook_signing_key
                else None
            ),
            max_age_seconds=inbound.signature_max_age_seconds,
            max_bytes=inbound.max_event_bytes,
            sns=sns_certificates(settings, resources),
            ses_topics=frozenset(settings.ses.topic_arns),
        ),
        campaigns=campaigns,
        archive=PublicArchive(campaign_context),
        bot_check=BotCheck(
            enabled=settings.audience.altcha,
            max_number=settings.audience.altcha_max_number,
            context=audience,
        ),
        sending=sending,
        sends=CampaignLifecycle(sending),
        send_status=SendStatusReader(sending),
        statistics=StatisticsReader(sending),
        listing=CampaignListing(sending),
        retries=SendRetries(sending),
        reconciler=Reconciler(sending),
        control=control,
        resources=resources,
        _email_provider=email_provider,
        _webhook_client=webhook_client,
    )


def admin_accounts(
    settings: Settings, db: Database, clock: Clock, site_secret: SiteSecret, audit: AuditLog
) -> AdminAccounts:
    """Admin UI operators: session timeouts and sign-in limits from `admin_ui` (UI-1, UI-2)."""
    ui = settings.admin_ui
    limits = SignInLimits(
        per_client=ui.sign_in_limit_per_client,
        per_ip=ui.sign_in_limit_per_ip,
        window_seconds=ui.sign_in_window_seconds,
        per_account=ui.sign_in_limit_per_account,
        max_delay_seconds=ui.sign_in_max_delay_seconds,
    )
    return AdminAccounts(
        db,
        clock,
        policy=SessionPolicy(
            idle_timeout=timedelta(minutes=ui.session_idle_minutes),
            absolute_timeout=timedelta(hours=ui.session_absolute_hours),
        ),
        limiter=SignInLimiter(db, clock, site_secret, limits),
        passwords=PasswordHashing(ui.password_check_concurrency),
        audit=audit,
        two_factor=TwoFactor(db, clock, site_secret, audit, issuer=settings.site.name),
        site_name=settings.site.name,
        require_two_factor=ui.require_two_factor,
    )


def sns_certificates(settings: Settings, resources: AsyncExitStack) -> SnsCertificates | None:
    """The SNS certificate fetcher, when SES events are configured; closed with the container."""
    ses = settings.ses
    if not ses.topic_arns:
        return None
    verify = (
        provider_tls_context()
        if ses.ca_file is None
        else ssl.create_default_context(cafile=str(ses.ca_file))
    )
    certificates = SnsCertificates(host_pattern=ses.certificate_host_pattern, verify=verify)
    resources.push_async_callback(certificates.close)
    return certificates


@functools.cache
def provider_tls_context() -> ssl.SSLContext:
    """The TLS context of every provider client in this process (Mailgun's, one per sending
    domain, and the SNS certificate fetcher's): the trust store httpx sets up by default,
    loaded once instead of once per client, 0.8 MB each. The webhook client keeps its own,
    which ignores SSL_CERT_FILE and the like on purpose."""
    return httpx.create_ssl_context()


def mailgun_provider(mailgun: MailgunSettings, domain: str) -> MailgunProvider:
    assert mailgun.api_key is not None  # settings refuse provider=mailgun without a key
    return MailgunProvider(
        tls_context=provider_tls_context(),
        api_key=mailgun.api_key.get_secret_value(),
        domain=domain,
        base_url=str(mailgun.api_base_url),
        timeout_seconds=mailgun.timeout_seconds,
        max_batch_size=mailgun.max_batch_size,
        send_time_optimization_hours=mailgun.send_time_optimization_hours,
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
        in_flight_chunk=bulk.in_flight_chunk,
        submission_concurrency=bulk.submission_concurrency,
        recipient_retries=bulk.recipient_retries,
        send_deadline_seconds=settings.email.send_deadline_seconds,
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


async def start(container: Container, *, apply_migrations: bool) -> None:
    """Bring the container up: migrate if asked, then load the site secret and the
    suppression key (re-keying stored hashes the first time one is configured)."""
    if apply_migrations:
        await migrate.upgrade(container.db)
    configured = container.settings.site.secret
    at_head = await revision.is_at_head(container.db)
    if configured is not None:
        container.site_secret.value = configured.get_secret_value()
    elif at_head:
        async with container.db.write() as conn:
            container.site_secret.value = await get_or_create_secret(
                conn, "site", candidate=secrets.token_urlsafe(32), now=container.clock()
            )
    container.suppression_key.value = _suppression_key(container.settings.privacy)
    if at_head:
        await adopt_suppression_key(
            container.db, container.suppression_key.value, now=container.clock
        )


def _suppression_key(privacy: PrivacySettings) -> str | None:
    if privacy.suppression_key is not None:
        return privacy.suppression_key.get_secret_value()
    if privacy.suppression_key_file is None:
        return None
    try:
        lines = privacy.suppression_key_file.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InvalidInput(
            f"cannot read the suppression key file: {exc.strerror}",
            field="privacy.suppression_key_file",
        ) from None
    key = lines[0].strip() if lines else ""
    if len(key) < 16:
        raise InvalidInput(
            "the suppression key file must hold a key of at least 16 characters",
            field="privacy.suppression_key_file",
        )
    return key


@asynccontextmanager
async def running(settings: Settings, *, apply_migrations: bool) -> AsyncIterator[Container]:
    """A started container, closed on exit (the CLI's way in)."""
    container = build(settings)
    try:
        await start(container, apply_migrations=apply_migrations)
        yield container
    finally:
        await container.close()


def _bounce_mailbox(settings: Settings) -> MailboxAccount | None:
    """The IMAP bounce mailbox of `inbound.imap_*`, if one is set (PRV-6)."""
    inbound = settings.inbound
    if inbound.imap_host is None or inbound.imap_user is None or inbound.imap_password is None:
        return None
    return MailboxAccount(
        host=inbound.imap_host,
        port=inbound.imap_port,
        tls=inbound.imap_tls,
        user=inbound.imap_user,
        password=inbound.imap_password.get_secret_value(),
        mailbox=inbound.imap_mailbox,
    )
