"""The composition root's face: `build` wires every part from settings, `start` brings it up,
`running` is both for the CLI. Nothing else reads settings; nothing is built at import time."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

from tidings.access.admins import AdminAccounts, SessionPolicy
from tidings.access.audit import AuditLog
from tidings.access.keys import ApiKeys
from tidings.access.passwords import PasswordHashing
from tidings.access.sign_in_limits import SignInLimiter, SignInLimits
from tidings.access.two_factor import TwoFactor
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
from tidings.audience.ratelimit import SubscribeLimits, SubscribeRateLimiter
from tidings.audience.stats import AudienceStats
from tidings.audience.subscribers import Subscribers
from tidings.audience.suppression import Suppressions
from tidings.audience.suppression_key import adopt_suppression_key
from tidings.bootstrap.clock import utcnow
from tidings.bootstrap.container import Container
from tidings.bootstrap.keys import SiteSecret, SuppressionKey, suppression_key_from
from tidings.bootstrap.policies import auto_pause_policy, queue_policy, send_policy, theme_from
from tidings.bootstrap.providers import bounce_mailbox, sns_certificates
from tidings.campaigns.ab_tests import AbTests
from tidings.campaigns.archive import PublicArchive
from tidings.campaigns.auto_pause import AutoPause
from tidings.campaigns.checks import PresendChecks
from tidings.campaigns.context import SendingContext
from tidings.campaigns.control import SendControl
from tidings.campaigns.drafts import CampaignContext, CampaignDrafts
from tidings.campaigns.lifecycle import CampaignLifecycle
from tidings.campaigns.listing import CampaignListing
from tidings.campaigns.media import MediaLibrary
from tidings.campaigns.reconcile import Reconciler
from tidings.campaigns.retry import SendRetries
from tidings.campaigns.send_again import SendAgain
from tidings.campaigns.send_status import SendStatusReader
from tidings.campaigns.statistics import StatisticsReader
from tidings.config import (
    Settings,
    mask_url_password,
    placeholder_identity,
)
from tidings.delivery.provider import PerRecipientProvider
from tidings.delivery.webhook_client import WebhookClient
from tidings.domain.clock import Clock
from tidings.domain.feedback import BouncePolicy
from tidings.domain.identity import SendingIdentity
from tidings.engagement.activity import PersonActivity
from tidings.engagement.apply import EngagementApplier
from tidings.engagement.classify import shipped_rules
from tidings.engagement.intake import Intake
from tidings.engagement.results import EngagementResults
from tidings.observability.metrics import Metrics
from tidings.outbound.capture import CapturedMail
from tidings.outbound.email_jobs import Mailer
from tidings.outbound.message_outcomes import MessageOutcomes
from tidings.outbound.webhooks import Webhooks
from tidings.queue.service import JobQueue
from tidings.rendering import Pages, TemplateEngine
from tidings.storage import migrate, revision
from tidings.storage.database import Database, create_database
from tidings.storage.media_files import LocalMediaStore
from tidings.storage.site_secrets import get_or_create_secret

if TYPE_CHECKING:
    pass


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
        engagement_days_max=int(settings.tracking.retention_days),
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
    intake = Intake(db, site_secret, shipped_rules(), settings.tracking, clock, metrics)
    resources.push_async_callback(intake.close)  # before the database: writes what is buffered
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
        memberships=Memberships(audience),
        bulk=BulkActions(audience, public, subscribers, audit.record),
        audience_stats=AudienceStats(audience),
        activity=PersonActivity(
            db, clock, retention=timedelta(days=settings.tracking.retention_days)
        ),
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
        bounce_mailbox=bounce_mailbox(settings),
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
        checks=PresendChecks(campaign_context, campaigns, site_secret),
        archive=PublicArchive(campaign_context),
        media=MediaLibrary(
            db,
            LocalMediaStore(settings.media.directory),
            clock,
            audit.record,
            public_url=audience.public_url,
            max_bytes=settings.media.max_upload_bytes,
            max_pixels=settings.media.max_pixels,
        ),
        bot_check=BotCheck(
            enabled=settings.audience.altcha,
            max_number=settings.audience.altcha_max_number,
            context=audience,
        ),
        sending=sending,
        sends=CampaignLifecycle(sending),
        send_status=SendStatusReader(sending),
        statistics=StatisticsReader(
            db,
            clock,
            stored_above=settings.bulk_email.stored_statistics_above,
            interval=timedelta(seconds=settings.bulk_email.statistics_interval_seconds),
        ),
        engagement_results=EngagementResults(db),
        ab_tests=AbTests(sending, confidence=settings.ab.confidence),
        intake=intake,
        engagement_applier=EngagementApplier(db, settings.tracking, clock, webhooks),
        listing=CampaignListing(sending),
        send_again=SendAgain(
            campaign_context,
            campaigns,
            retention=timedelta(days=settings.tracking.retention_days),
        ),
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
    container.suppression_key.value = suppression_key_from(container.settings.privacy)
    if at_head:
        await adopt_suppression_key(
            container.db, container.suppression_key.value, now=container.clock
        )


@asynccontextmanager
async def running(settings: Settings, *, apply_migrations: bool) -> AsyncIterator[Container]:
    """A started container, closed on exit (the CLI's way in)."""
    container = build(settings)
    try:
        await start(container, apply_migrations=apply_migrations)
        yield container
    finally:
        await container.close()
