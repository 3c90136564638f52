"""The outside world's clients, from settings: email providers (DKIM-signing first), their
connection checks, the webhook client, the SNS certificate fetcher, the bounce mailbox."""

from __future__ import annotations

import functools
import ssl
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import httpx

from tidings.config import (
    MailgunSettings,
    Settings,
    SmtpSettings,
)
from tidings.delivery.connection_check import ConnectionCheck, check_mailgun, check_smtp
from tidings.delivery.dkim_signer import DkimSigner, DkimSigningProvider
from tidings.delivery.imap_mailbox import MailboxAccount
from tidings.delivery.mailgun import MailgunProvider
from tidings.delivery.provider import PerRecipientProvider
from tidings.delivery.smtp import SmtpProvider
from tidings.delivery.sns import SnsCertificates
from tidings.delivery.webhook_client import WebhookClient
from tidings.domain.clock import Clock
from tidings.domain.errors import InvalidInput
from tidings.outbound.capture import CaptureProvider
from tidings.storage.database import Database

if TYPE_CHECKING:
    pass


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


def bounce_mailbox(settings: Settings) -> MailboxAccount | None:
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
