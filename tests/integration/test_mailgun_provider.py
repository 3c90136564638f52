"""The Mailgun-compatible batch provider against the real dev server on loopback (PRV-2, PRV-4,
SND-13): what one batch sends, and how every kind of answer, or its absence, is classified."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from structlog.testing import capture_logs

from tidings.delivery.mailgun import MailgunProvider
from tidings.delivery.provider import (
    BatchMessage,
    BatchProvider,
    BatchRecipient,
    DeliveryFailure,
    Envelope,
    PermanentFailure,
    ProviderUnreachable,
    TemporaryFailure,
    UncertainDelivery,
)
from tidings.devservers.dev_faults import Fault
from tidings.devservers.dev_server import DevProviderServer, run_dev_provider
from tidings.domain.email_headers import message_id

DOMAIN = "mg.example.com"
API_KEY = "key-test-0123456789"
# Long enough for a 1,000-recipient batch on a loaded 2-core machine (0.5 s once timed out a
# 42-recipient one in CI); the slow-answer test waits past it on purpose.
TIMEOUT = 2.0


def make_batch(count: int = 3, *, prefix: str = "reader", **overrides: Any) -> BatchMessage:
    recipients = [
        BatchRecipient(
            address=f"{prefix}{n}@example.com",
            message_id=message_id("cmp1", f"{prefix}{n}@example.com", DOMAIN),
            variables=(f"Reader {n}", f"tok{n:04d}"),
        )
        for n in range(count)
    ]
    fields: dict[str, Any] = {
        "sender": "News <news@example.com>",
        "subject": "Hello %recipient.name%",
        "html": "<p>Hi %recipient.name%</p>",
        "text": "Hi %recipient.name%",
        "variable_names": ("name", "token"),
        "headers": {
            "List-Unsubscribe": (
                "<https://example.com/u/%recipient.token%>,\r\n <mailto:u@example.com>"
            ),
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        },
        "recipients": recipients,
        "idempotency_key": "batch-17",
    }
    fields.update(overrides)
    return BatchMessage(**fields)


def make_provider(server: DevProviderServer, **overrides: Any) -> MailgunProvider:
    options: dict[str, Any] = {
        "api_key": API_KEY,
        "domain": DOMAIN,
        "base_url": server.base_url,
        "timeout_seconds": TIMEOUT,
    }
    options.update(overrides)
    return MailgunProvider(**options)


@pytest.fixture
async def provider(dev_provider: DevProviderServer) -> AsyncIterator[MailgunProvider]:
    mailgun = make_provider(dev_provider)
    yield mailgun
    await mailgun.close()


async def test_a_thousand_recipients_go_in_one_call_each_with_its_message_id_and_variables(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """A full batch is one request, and each reader must get their own Message-ID and text."""
    batch = make_batch(1000)
    result = await provider.send_batch(batch)
    assert result.accepted == [r.address for r in batch.recipients]
    assert result.rejected == {}
    # Mailgun echoes the templated Message-Id header: there is no single id for the batch.
    assert result.provider_message_id is None
    assert dev_provider.stats["requests"] == 1
    stored = {recipient.address: recipient for recipient in dev_provider.store.recipients}
    assert len(stored) == 1000
    for n, sent in enumerate(batch.recipients):
        received = stored[sent.address]
        assert received.message_id == sent.message_id
        assert received.subject == f"Hello Reader {n}"
        assert received.domain == DOMAIN
        assert received.text() == f"Hi Reader {n}"
        assert received.headers()["List-Unsubscribe"] == (
            f"<https://example.com/u/tok{n:04d}>, <mailto:u@example.com>"
        )
    [stored_batch] = dev_provider.store.batches
    assert stored_batch.user_variables == {"tidings-batch": "batch-17"}
    assert stored_batch.headers["List-Unsubscribe-Post"].source == "List-Unsubscribe=One-Click"


async def test_every_value_reaches_the_provider_exactly_as_given(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """The recipient variables are JSON written value by value: quotes, backslashes, line and
    paragraph separators, control characters and non-ASCII text arrive unchanged."""
    names = ['Zoë "Q" O\\Brien', "Line\u2028Para\u2029", "tab\tbell\u0007", "</script>&amp;"]
    batch = make_batch(len(names))
    batch = replace(
        batch,
        recipients=[
            recipient._replace(variables=(name, recipient.variables[1]))
            for recipient, name in zip(batch.recipients, names, strict=True)
        ],
    )
    await provider.send_batch(batch)
    stored = {recipient.address: recipient for recipient in dev_provider.store.recipients}
    for sent, name in zip(batch.recipients, names, strict=True):
        assert stored[sent.address].subject == f"Hello {name}"


async def test_the_provider_is_a_batch_provider_with_mailguns_limit(
    provider: MailgunProvider,
) -> None:
    """The sending engine picks providers by protocol and sizes batches by their maximum."""
    assert isinstance(provider, BatchProvider)
    assert provider.max_batch_size == 1000
    with pytest.raises(ValueError, match="max_batch_size"):
        MailgunProvider(api_key=API_KEY, domain=DOMAIN, max_batch_size=1001)


async def test_a_batch_over_the_maximum_is_refused_before_any_call(
    dev_provider: DevProviderServer,
) -> None:
    """Mailgun would refuse or split it; a wrong-sized batch is a bug to stop, not to send."""
    small = make_provider(dev_provider, max_batch_size=10)
    try:
        with pytest.raises(PermanentFailure, match="over this provider's maximum of 10"):
            await small.send_batch(make_batch(11))
    finally:
        await small.close()
    assert dev_provider.stats.get("requests", 0) == 0


@pytest.mark.parametrize(
    "change",
    [
        {"headers": {"Message-ID": "<fixed@example.com>"}},
        {"headers": {"X-Note": "one\nX-Injected: two"}},
        {"deliver_at": datetime(2030, 1, 1, 12, 0)},  # noqa: DTZ001 - naive on purpose
        {"variable_names": ("name", "message_id")},
        {"variable_names": ("name",)},
    ],
    ids=[
        "message-id-header",
        "header-injection",
        "naive-deliver-at",
        "reserved-variable",
        "values-not-matching-names",
    ],
)
async def test_a_batch_mailgun_would_mangle_is_refused_before_any_call(
    dev_provider: DevProviderServer, provider: MailgunProvider, change: dict[str, Any]
) -> None:
    """A shared Message-ID, an injected header or an ambiguous time must never reach Mailgun."""
    with pytest.raises(PermanentFailure):
        await provider.send_batch(make_batch(2, **change))
    assert dev_provider.stats.get("requests", 0) == 0


async def test_two_recipients_with_one_address_are_refused_before_any_call(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """Recipient variables are keyed by address: a duplicate would silently lose a recipient."""
    batch = make_batch(2)
    twice = make_batch(recipients=[batch.recipients[0], batch.recipients[0]])
    with pytest.raises(PermanentFailure, match="share one address"):
        await provider.send_batch(twice)
    assert dev_provider.stats.get("requests", 0) == 0


async def test_an_empty_batch_makes_no_call(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """A batch whose recipients were all excluded completes with no provider call (SND-11)."""
    result = await provider.send_batch(make_batch(0))
    assert result.accepted == []
    assert dev_provider.stats.get("requests", 0) == 0


async def test_delivery_time_and_send_time_optimisation_reach_the_provider(
    dev_provider: DevProviderServer,
) -> None:
    """Spreading a send over a window only works if Mailgun is told when to deliver each batch."""
    at = datetime(2030, 1, 1, 13, 30, tzinfo=UTC) + timedelta(hours=1)
    mailgun = make_provider(dev_provider, send_time_optimization_hours=48)
    try:
        await mailgun.send_batch(make_batch(1, deliver_at=at.astimezone()))
    finally:
        await mailgun.close()
    [stored] = dev_provider.store.batches
    assert stored.options["deliverytime"] == [format_datetime(at, usegmt=True)]
    assert stored.options["deliverytime-optimize-period"] == ["48h"]


async def test_mailguns_own_tracking_is_off_for_every_message(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """A domain with Mailgun's tracking on must not rewrite tidings' links or add its pixel:
    that would track people the newsletter's mode or their consent says not to (ENG-1)."""
    await provider.send_batch(make_batch(1))
    envelope = Envelope(
        "news@example.com", ["reader@example.com"], b"Subject: hi\r\n\r\nhi\r\n", "<m@x>"
    )
    await provider.send(envelope)
    assert len(dev_provider.store.batches) == 2  # the campaign batch and the MIME message
    for stored in dev_provider.store.batches:
        off = {name: stored.options.get(name) for name in TRACKING}
        assert off == {name: ["no"] for name in TRACKING}


TRACKING = ("tracking", "tracking-clicks", "tracking-opens")


@pytest.mark.parametrize(
    ("retry_after", "seconds"),
    [("7", 7.0), ("99999", 3600.0), (None, None)],
    ids=["seconds", "capped", "absent"],
)
async def test_429_is_temporary_and_carries_retry_after(
    dev_provider: DevProviderServer,
    provider: MailgunProvider,
    retry_after: str | None,
    seconds: float | None,
) -> None:
    """A rate-limited batch must wait as long as the provider asks (PRV-5), then go again."""
    dev_provider.faults.replace([Fault(action="status", status=429, retry_after=retry_after)])
    with pytest.raises(TemporaryFailure) as caught:
        await provider.send_batch(make_batch())
    assert caught.value.status == 429
    assert caught.value.retry_after_seconds == seconds
    assert dev_provider.store.recipients == []


async def test_retry_after_as_an_http_date_is_read_as_seconds_from_now(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """RFC 9110 allows a date; misreading it would retry at once or never."""
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    dev_provider.faults.replace([Fault(action="status", status=429, retry_after=later)])
    with pytest.raises(TemporaryFailure) as caught:
        await provider.send_batch(make_batch())
    assert caught.value.retry_after_seconds is not None
    assert 100 <= caught.value.retry_after_seconds <= 120


@pytest.mark.parametrize("status", [408, 500, 502, 503])
async def test_server_errors_and_request_timeout_are_temporary(
    dev_provider: DevProviderServer, provider: MailgunProvider, status: int
) -> None:
    """The provider refused this attempt without taking the batch: retrying later is safe."""
    dev_provider.faults.replace([Fault(action="status", status=status, times=1)])
    with pytest.raises(TemporaryFailure) as caught:
        await provider.send_batch(make_batch())
    assert caught.value.status == status
    assert dev_provider.store.recipients == []
    # The fault was for one request only: the retry goes through.
    assert len((await provider.send_batch(make_batch())).accepted) == 3


async def test_a_gateway_timeout_is_uncertain(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """A 504 means a proxy gave up waiting on Mailgun, which may still accept: never resend."""
    dev_provider.faults.replace([Fault(action="status", status=504)])
    with pytest.raises(UncertainDelivery) as caught:
        await provider.send_batch(make_batch())
    assert caught.value.status == 504


@pytest.mark.parametrize("status", [400, 403, 404, 413])
async def test_other_client_errors_are_permanent(
    dev_provider: DevProviderServer, provider: MailgunProvider, status: int
) -> None:
    """The same request will be refused the same way; retrying only delays the failure."""
    dev_provider.faults.replace([Fault(action="status", status=status)])
    with pytest.raises(PermanentFailure) as caught:
        await provider.send_batch(make_batch())
    assert caught.value.status == status


async def test_a_wrong_api_key_is_permanent_and_the_right_one_is_accepted() -> None:
    """A bad key fails every batch alike; it must stop the send, not retry for hours."""
    async with run_dev_provider(api_key=API_KEY) as server:
        wrong = make_provider(server, api_key="key-wrong")
        right = make_provider(server)
        try:
            with pytest.raises(PermanentFailure) as caught:
                await wrong.send_batch(make_batch())
            assert caught.value.status == 401
            assert len((await right.send_batch(make_batch())).accepted) == 3
        finally:
            await wrong.close()
            await right.close()
        assert server.stats["unauthorised"] == 1


async def test_an_answer_slower_than_the_timeout_is_uncertain_and_may_still_be_accepted(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """The request went out whole; the provider may act on it after we stop waiting (SND-13)."""
    dev_provider.faults.replace([Fault(action="accept", delay_seconds=TIMEOUT + 0.3)])
    with pytest.raises(UncertainDelivery):
        await provider.send_batch(make_batch())
    # The slow provider did accept: resending would have mailed everyone twice.
    for _ in range(100):
        if len(dev_provider.store.recipients) == 3:
            break
        await asyncio.sleep(0.02)
    assert len(dev_provider.store.recipients) == 3


async def test_a_connection_dropped_after_acceptance_is_uncertain(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """The provider stored the batch and the answer was lost: only an operator may resend."""
    dev_provider.faults.replace([Fault(action="drop_after_accept", times=1)])
    with pytest.raises(UncertainDelivery):
        await provider.send_batch(make_batch())
    assert len(dev_provider.store.recipients) == 3
    assert dev_provider.stats["dropped_after_accept"] == 1


async def test_a_connection_dropped_before_acceptance_looks_the_same_to_the_client(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """From outside, a drop before and after acceptance look alike; both stay uncertain."""
    dev_provider.faults.replace([Fault(action="drop_before_accept", times=1)])
    with pytest.raises(UncertainDelivery):
        await provider.send_batch(make_batch())
    assert dev_provider.store.recipients == []
    # The dropped connection is not reused: the next batch goes through on a fresh one.
    assert len((await provider.send_batch(make_batch())).accepted) == 3


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def unreachable_provider() -> MailgunProvider:
    """A provider pointed at a loopback port where nothing listens."""
    return MailgunProvider(
        api_key=API_KEY,
        domain=DOMAIN,
        base_url=f"http://127.0.0.1:{unused_port()}",
        timeout_seconds=TIMEOUT,
    )


async def test_nothing_listening_is_temporary() -> None:
    """Nothing was sent, so nothing can have been accepted: retrying is safe."""
    mailgun = unreachable_provider()
    try:
        with pytest.raises(ProviderUnreachable) as caught:
            await mailgun.send_batch(make_batch())
    finally:
        await mailgun.close()
    assert isinstance(caught.value, TemporaryFailure)


async def test_a_connection_reset_while_the_body_is_still_being_written_is_temporary() -> None:
    """The provider never had the whole request, so it cannot have accepted it: retry is safe."""

    async def reset_after_headers(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await reader.readuntil(b"\r\n\r\n")
        # SO_LINGER 0: close with RST, as a crashing or overloaded front end would.
        writer.get_extra_info("socket").setsockopt(
            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
        )
        writer.transport.abort()

    server = await asyncio.start_server(reset_after_headers, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    mailgun = MailgunProvider(
        api_key=API_KEY, domain=DOMAIN, base_url=f"http://127.0.0.1:{port}", timeout_seconds=5
    )
    try:
        # Far more than loopback socket buffers hold, so the reset lands mid-body.
        with pytest.raises(TemporaryFailure) as caught:
            await mailgun.send_batch(make_batch(2, html="x" * 32_000_000))
    finally:
        await mailgun.close()
        server.close()
        await server.wait_closed()
    assert not isinstance(caught.value, UncertainDelivery)


async def test_rejected_recipients_in_an_accepted_batch_are_reported_one_by_one(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """One refused address must be recorded against that recipient, never fail the others."""
    rejecting = Fault(action="reject", reject_fraction=0.3, reject_status=550)
    dev_provider.faults.replace([rejecting])
    batch = make_batch(40)
    marked = make_batch(2, prefix="x+defer451-")
    result = await provider.send_batch(
        make_batch(recipients=[*batch.recipients, *marked.recipients])
    )
    chosen = {r.address for r in batch.recipients if rejecting.rejects(r.address)}
    assert 0 < len(chosen) < 40
    deferred = {r.address for r in marked.recipients}
    assert set(result.rejected) == chosen | deferred
    assert all(result.rejected[a].permanent and result.rejected[a].status == 550 for a in chosen)
    assert all(not result.rejected[a].permanent for a in deferred)
    assert all(result.rejected[a].status == 451 for a in deferred)
    assert set(result.accepted) == {r.address for r in batch.recipients} - chosen
    assert {r.address for r in dev_provider.store.recipients} == set(result.accepted)


async def test_no_address_or_response_text_reaches_the_logs(
    dev_provider: DevProviderServer, provider: MailgunProvider
) -> None:
    """Logs are shipped and kept; addresses and provider text in them are a privacy leak (PRI-5)."""
    dev_provider.faults.replace(
        [
            Fault(action="status", status=503, times=1),
            Fault(action="status", status=400, times=1),
            Fault(action="drop_after_accept", times=1),
            Fault(action="reject", reject_fraction=0.5, times=1),
        ]
    )
    with capture_logs() as events:
        for _ in range(4):
            with contextlib.suppress(DeliveryFailure):
                await provider.send_batch(make_batch(5))
        await provider.send_batch(make_batch(5))
    assert [event["event"] for event in events] == [
        "provider.batch.failed",
        "provider.batch.failed",
        "provider.batch.failed",
        "provider.batch.accepted",
        "provider.batch.accepted",
    ]
    assert [event.get("outcome") for event in events[:3]] == ["temporary", "permanent", "uncertain"]
    logged = repr(events)
    assert "reader" not in logged
    assert "example.com>" not in logged
    assert "injected" not in logged
    assert "Queued" not in logged


async def test_a_closed_provider_fails_temporarily(provider: MailgunProvider) -> None:
    """A worker shutting down may still hand over a batch; it must be retried, not lost."""
    await provider.close()
    with pytest.raises(TemporaryFailure, match="closed"):
        await provider.send_batch(make_batch())
