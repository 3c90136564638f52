"""Transactional email through the Mailgun-compatible provider: one serialised message per call
to `messages.mime` on the real dev server over loopback (PRV-2, PRV-4), classified exactly as
batches are, and a queued `send_email` job sent end to end."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from structlog.testing import capture_logs

from tests.integration.test_mailgun_provider import (
    API_KEY,
    DOMAIN,
    make_provider,
    unreachable_provider,
)
from tests.support.queue_policy import policy
from tidings.bootstrap import utcnow
from tidings.delivery.mailgun import MailgunProvider
from tidings.delivery.provider import (
    DeliveryFailure,
    Envelope,
    PermanentFailure,
    PerRecipientProvider,
    ProviderUnreachable,
    TemporaryFailure,
    UncertainDelivery,
)
from tidings.devservers.dev_faults import Fault
from tidings.devservers.dev_server import DevProviderServer, run_dev_provider
from tidings.domain.jobs import JobStatus
from tidings.outbound.email_jobs import (
    SEND_EMAIL,
    EmailJobHandler,
    Mailer,
    TransactionalEmail,
)
from tidings.queue.policy import HandlerRegistry
from tidings.queue.service import JobQueue
from tidings.queue.worker import Worker
from tidings.storage.database import Database

READER = "reader.ann@example.org"
MESSAGE_ID = "<welcome-ann@news.example.com>"


def welcome(to: str = READER, *, message_id: str = MESSAGE_ID) -> TransactionalEmail:
    return TransactionalEmail(
        to=to,
        subject="Confirm your subscription: café edition",
        text="Click the link to confirm.",
        html="<p>Click the link to confirm.</p>",
        sender="news@news.example.com",
        sender_name="The News",
        message_id=message_id,
        headers={"X-Tidings-Kind": "confirmation"},
    )


def envelope(to: str = READER) -> Envelope:
    return welcome(to).envelope(default_message_id="<unused@example.com>", now=utcnow())


@pytest.fixture
async def provider(dev_provider: DevProviderServer) -> AsyncIterator[MailgunProvider]:
    mailgun = make_provider(dev_provider)
    yield mailgun
    await mailgun.close()


async def test_a_transactional_message_is_accepted_and_stored_with_its_message_id_and_subject(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """Confirmations must reach Mailgun as built, findable by the Message-ID tidings chose."""
    assert isinstance(provider, PerRecipientProvider)
    assert provider.name == "mailgun"
    result = await provider.send(envelope())
    assert result.accepted == [READER]
    assert result.rejected == {}
    assert result.provider_message_id == MESSAGE_ID
    assert dev_provider.stats["mime_requests"] == 1
    [stored] = dev_provider.store.recipients
    assert (stored.address, stored.domain) == (READER, DOMAIN)
    assert stored.message_id == MESSAGE_ID
    assert stored.subject == "Confirm your subscription: café edition"
    assert stored.headers()["X-Tidings-Kind"] == "confirmation"
    assert stored.text().strip() == "Click the link to confirm."


async def test_429_is_temporary_with_retry_after(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """A rate-limited confirmation must wait as long as Mailgun asks (PRV-5), then go again."""
    dev_provider.faults.replace([Fault(action="status", status=429, retry_after="7")])
    with pytest.raises(TemporaryFailure) as caught:
        await provider.send(envelope())
    assert (caught.value.status, caught.value.retry_after_seconds) == (429, 7.0)
    assert dev_provider.store.recipients == []


@pytest.mark.parametrize(
    ("status", "failure"),
    [
        (408, TemporaryFailure),
        (503, TemporaryFailure),
        (504, UncertainDelivery),
        (400, PermanentFailure),
        (413, PermanentFailure),
    ],
)
async def test_statuses_are_classified_as_for_batches(
    dev_provider: DevProviderServer,
    provider: MailgunProvider,
    status: int,
    failure: type[DeliveryFailure],
) -> None:
    """One classification for both calls: a status must never mean retry here, give up there."""
    dev_provider.faults.replace([Fault(action="status", status=status)])
    with pytest.raises(failure) as caught:
        await provider.send(envelope())
    assert caught.value.status == status
    assert type(caught.value) is failure


async def test_a_wrong_api_key_is_permanent() -> None:
    """A bad key fails every message alike; retrying confirmations for hours would hide it."""
    async with run_dev_provider(api_key=API_KEY) as server:
        wrong = make_provider(server, api_key="key-wrong")
        try:
            with pytest.raises(PermanentFailure) as caught:
                await wrong.send(envelope())
        finally:
            await wrong.close()
        assert caught.value.status == 401
        assert server.stats["unauthorised"] == 1
        assert server.store.recipients == []


async def test_a_connection_dropped_after_acceptance_is_uncertain(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """Mailgun had the message and the answer was lost: the caller must know it may be out."""
    dev_provider.faults.replace([Fault(action="drop_after_accept", times=1)])
    with pytest.raises(UncertainDelivery):
        await provider.send(envelope())
    assert [r.message_id for r in dev_provider.store.recipients] == [MESSAGE_ID]


async def test_nothing_listening_is_unreachable_and_temporary() -> None:
    """Nothing was sent, so nothing can have been accepted: retrying is safe."""
    mailgun = unreachable_provider()
    try:
        with pytest.raises(ProviderUnreachable) as caught:
            await mailgun.send(envelope())
    finally:
        await mailgun.close()
    assert isinstance(caught.value, TemporaryFailure)


async def test_a_message_without_recipients_is_refused_before_any_call(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """An empty or injected `to` is a caller's bug; Mailgun must not be asked to guess."""
    empty = Envelope(sender="news@example.com", recipients=[], data=b"x", message_id="<x@y>")
    broken = Envelope(
        sender="news@example.com", recipients=["a@example.org\r\nb"], data=b"x", message_id="<x@y>"
    )
    for refused in (empty, broken):
        with pytest.raises(PermanentFailure):
            await provider.send(refused)
    assert dev_provider.stats.get("requests", 0) == 0


async def test_no_address_or_response_text_reaches_the_logs(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """Logs are shipped and kept; an address or provider text in them is a leak (PRI-5)."""
    dev_provider.faults.replace(
        [
            Fault(action="status", status=503, times=1),
            Fault(action="status", status=400, times=1),
            Fault(action="drop_after_accept", times=1),
        ]
    )
    with capture_logs() as events:
        for _ in range(3):
            with contextlib.suppress(DeliveryFailure):
                await provider.send(envelope())
        await provider.send(envelope("reader.bob+reject550@example.org"))
    assert [(event["event"], event.get("outcome")) for event in events] == [
        ("provider.message.failed", "temporary"),
        ("provider.message.failed", "permanent"),
        ("provider.message.failed", "uncertain"),
        ("provider.message.accepted", None),
    ]
    assert events[-1]["rejected_count"] == 1
    logged = repr(events)
    assert "reader" not in logged
    assert "example.org" not in logged
    assert "injected" not in logged
    assert "Queued" not in logged


FAST = policy(
    lease_seconds=5, poll_interval_seconds=0.05, max_attempts=3, backoff_base_seconds=0.01
)


@pytest.mark.parametrize(
    ("faults", "status", "last_error", "stored"),
    [
        ([], JobStatus.DONE, None, 1),
        ([Fault(action="drop_after_accept")], JobStatus.PENDING, "mailgun uncertain delivery", 1),
        (
            [Fault(action="status", status=401)],
            JobStatus.DEAD,
            "refuses the sender (API key refused, reply 401)",
            0,
        ),
    ],
    ids=["accepted", "answer-lost-retried", "refused"],
)
async def test_a_queued_send_email_job_goes_through_mailgun(
    db: Database,
    dev_provider: DevProviderServer,
    provider: MailgunProvider,
    faults: list[Fault],
    status: JobStatus,
    last_error: str | None,
    stored: int,
) -> None:
    """With email.provider = mailgun, confirmations queued by use cases must reach Mailgun."""
    dev_provider.faults.replace(faults)
    queue = JobQueue(db, FAST, utcnow)
    job, _ = await Mailer(db, queue).queue(welcome(), idempotency_key="welcome-ann")
    registry = HandlerRegistry()
    handler = EmailJobHandler(provider, utcnow, deadline_seconds=2, domain="news.example.com")
    registry.register(SEND_EMAIL, handler)
    worker = Worker(db, registry, FAST, utcnow)
    assert await worker.claim_round() == 1
    await worker.drain(5)
    finished, _ = await queue.get(job.id)
    assert finished.status == status
    if last_error is None:
        assert finished.last_error is None
    else:  # named with the API's host and port, which vary
        assert finished.last_error is not None
        assert last_error in finished.last_error
    found = dev_provider.store.find(message_id=MESSAGE_ID, address=READER)
    assert [r.subject for r in found] == ["Confirm your subscription: café edition"] * stored
