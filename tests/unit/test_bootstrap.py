"""The composition root owns its parts: one clock, providers built once and closed once."""

from pathlib import Path

from tests.factories import make_settings
from tests.support.clock import Clock
from tests.support.sending import batch_provider_settings
from tidings.bootstrap import build, mailgun_provider
from tidings.delivery.mailgun import MailgunProvider
from tidings.delivery.provider import Envelope, SendResult
from tidings.outbound.capture import CaptureProvider
from tidings.storage import migrate


class RecordingProvider:
    """Counts closes; sends nothing (what is under test is who closes it)."""

    name = "recording"

    def __init__(self) -> None:
        self.closed = 0

    async def send(self, envelope: Envelope) -> SendResult:
        return SendResult(accepted=list(envelope.recipients))

    async def close(self) -> None:
        self.closed += 1


async def test_a_given_provider_serves_every_send_and_is_closed_once(tmp_path: Path) -> None:
    """Tests and embedders swap the provider in one place; nothing builds a second one."""
    provider = RecordingProvider()
    container = build(make_settings(f"sqlite:///{tmp_path / 'x.db'}"), email_provider=provider)
    assert container.email_provider() is provider
    container.handler_registry()
    assert container.email_provider() is provider
    await container.close()
    assert provider.closed == 1


async def test_the_configured_provider_is_built_once(tmp_path: Path) -> None:
    """Each build used to open another pool; one process keeps one."""
    container = build(make_settings(f"sqlite:///{tmp_path / 'x.db'}"))
    first = container.email_provider()
    assert isinstance(first, CaptureProvider)
    assert container.email_provider() is first
    assert container.webhook_client() is container.webhook_client()
    await container.close()


async def test_the_clock_given_to_build_is_the_one_every_part_reads(tmp_path: Path) -> None:
    """One clock: a test that moves time moves it for the whole process."""
    clock = Clock()
    container = build(make_settings(f"sqlite:///{tmp_path / 'x.db'}"), clock=clock)
    try:
        assert container.clock is clock
        await migrate.upgrade(container.db)
        created = await container.api_keys.create("clocked")
        assert created.key.created_at == clock.now
    finally:
        await container.close()


async def test_provider_clients_share_one_tls_context(tmp_path: Path) -> None:
    """Loading the trust store costs each HTTP client 0.8 MB of a worker (issue 27): the
    transactional Mailgun client and the batch clients of every sending domain share one
    context."""
    settings = batch_provider_settings(f"sqlite:///{tmp_path / 'x.db'}", "https://api.example")
    container = build(settings)
    try:
        transactional = container.email_provider()
        assert isinstance(transactional, MailgunProvider)
        warming = mailgun_provider(settings.mailgun, "warm.example.org")
        assert transactional.tls_context is not None
        assert warming.tls_context is transactional.tls_context
        await warming.close()
    finally:
        await container.close()


async def test_a_worker_builds_the_webhook_client_at_its_first_delivery(tmp_path: Path) -> None:
    """Its TLS context alone is 0.8 MB of every worker (issue 27): an install that has no
    webhooks never pays it. The handlers are ready without it; asking builds it once."""
    container = build(make_settings(f"sqlite:///{tmp_path / 'x.db'}"))
    try:
        container.handler_registry()
        assert container._webhook_client is None
        assert container.webhook_client() is container.webhook_client()
    finally:
        await container.close()
