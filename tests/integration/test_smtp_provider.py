"""The SMTP relay provider against the real sink on loopback (PRV-1, PRV-4, SND-12)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.tls import self_signed_certificate
from tidings.bootstrap import utcnow
from tidings.delivery.provider import (
    Envelope,
    PermanentFailure,
    PerRecipientProvider,
    SenderRefused,
    TemporaryFailure,
    UncertainDelivery,
)
from tidings.delivery.smtp import SmtpProvider
from tidings.devservers.sink import Faults, SmtpSink

TIMEOUT = 0.5


def make_envelope(
    *recipients: str, subject: str = "Hello", sender: str = "news@example.com"
) -> Envelope:
    data = (
        f"From: Tidings <{sender}>\r\n"
        f"To: undisclosed-recipients:;\r\n"
        f"Subject: {subject}\r\n"
        "Message-ID: <m1@example.com>\r\n"
        "MIME-Version: 1.0\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        "Content-Transfer-Encoding: 8bit\r\n"
        "\r\n"
        "Caf\u00e9 news.\r\n"
        ".a line starting with a dot survives dot-stuffing\r\n"
    ).encode()
    return Envelope(
        sender=sender,
        recipients=list(recipients or ["alice@example.com"]),
        data=data,
        message_id="<m1@example.com>",
    )


def make_provider(sink: SmtpSink, **overrides: Any) -> SmtpProvider:
    options: dict[str, Any] = {
        "host": sink.host,
        "port": sink.port,
        "security": "none",
        "timeout_seconds": TIMEOUT,
        "pool_size": 2,
        "local_hostname": "tests.invalid",
    }
    options.update(overrides)
    return SmtpProvider(**options)


@pytest.fixture(params=[True, False], ids=["pipelining", "one-at-a-time"])
async def sink(request: pytest.FixtureRequest) -> AsyncIterator[SmtpSink]:
    """Every behaviour holds whether the relay offers PIPELINING (RFC 2920) or not."""
    async with SmtpSink(clock=utcnow, pipelining=request.param) as running:
        yield running


@pytest.fixture
async def provider(sink: SmtpSink) -> AsyncIterator[SmtpProvider]:
    smtp = make_provider(sink)
    yield smtp
    await smtp.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_message_arrives_byte_identical_with_its_envelope(
    sink: SmtpSink, provider: SmtpProvider
) -> None:
    """The message is serialised (and signed, later DKIM) once; the relay must get exactly it."""
    envelope = make_envelope("alice@example.com")
    result = await provider.send(envelope)
    assert isinstance(provider, PerRecipientProvider)
    assert list(result.accepted) == ["alice@example.com"]
    assert result.rejected == {}
    [received] = await sink.wait_for(1, TIMEOUT)
    assert received.data == envelope.data
    assert received.mail_from == "news@example.com"
    assert received.recipients == ("alice@example.com",)
    assert result.provider_message_id == received.queue_id


async def test_pool_reuses_at_most_pool_size_connections(sink: SmtpSink) -> None:
    """Opening a connection per message is slow and trips relay rate limits on big sends."""
    smtp = make_provider(sink, pool_size=2)
    try:
        results = await asyncio.gather(
            *(smtp.send(make_envelope(f"user{n}@example.com")) for n in range(20))
        )
        assert all(len(result.accepted) == 1 for result in results)
        assert len(sink.messages) == 20
        assert 1 <= sink.connections_accepted <= 2
        for n in range(5):
            await smtp.send(make_envelope(f"again{n}@example.com"))
        assert sink.connections_accepted <= 2
    finally:
        await smtp.close()


async def test_one_refused_recipient_is_reported_and_the_others_get_the_message(
    sink: SmtpSink, provider: SmtpProvider
) -> None:
    """SND-12: a bad address must not fail the good ones sharing its envelope."""
    recipients = ["a@example.com", "b+reject550@example.com", "c@example.com"]
    result = await provider.send(make_envelope(*recipients))
    assert list(result.accepted) == ["a@example.com", "c@example.com"]
    rejection = result.rejected["b+reject550@example.com"]
    assert rejection.permanent is True
    assert rejection.status == 550
    [received] = await sink.wait_for(1, TIMEOUT)
    assert received.recipients == ("a@example.com", "c@example.com")


async def test_deferred_recipient_is_a_temporary_rejection(
    sink: SmtpSink, provider: SmtpProvider
) -> None:
    """A 4xx on RCPT is retried later for that recipient, not bounced."""
    result = await provider.send(make_envelope("a@example.com", "b+defer451@example.com"))
    assert list(result.accepted) == ["a@example.com"]
    rejection = result.rejected["b+defer451@example.com"]
    assert (rejection.permanent, rejection.status) == (False, 451)


async def test_all_recipients_refused_returns_a_result_without_sending_data(
    sink: SmtpSink, provider: SmtpProvider
) -> None:
    """Per-recipient outcomes are still known, so this is a result, not an exception."""
    result = await provider.send(make_envelope("a+reject550@example.com", "b+defer451@example.com"))
    assert list(result.accepted) == []
    assert {address: r.permanent for address, r in result.rejected.items()} == {
        "a+reject550@example.com": True,
        "b+defer451@example.com": False,
    }
    assert sink.data_commands == 0
    # A deferral (4xx) may be the relay's limit for this connection (452): the next message
    # goes out on a fresh one (PRV-1).
    await provider.send(make_envelope("c@example.com"))
    assert sink.connections_accepted == 2


async def test_refused_recipients_alone_keep_the_connection_for_the_next_message(
    sink: SmtpSink, provider: SmtpProvider
) -> None:
    """A permanent refusal says nothing about the connection: after RSET it is reused."""
    result = await provider.send(make_envelope("a+reject550@example.com"))
    assert list(result.rejected) == ["a+reject550@example.com"]
    await provider.send(make_envelope("c@example.com"))
    assert sink.connections_accepted == 1


@pytest.mark.parametrize(
    ("faults", "failure", "status"),
    [
        (Faults(data_reply="451 4.3.0 try later"), TemporaryFailure, 451),
        (Faults(data_reply="554 5.7.1 rejected"), PermanentFailure, 554),
        (Faults(mail_reply="451 4.3.0 try later"), TemporaryFailure, 451),
        (Faults(mail_reply="550 5.7.1 sender refused"), PermanentFailure, 550),
    ],
)
async def test_refused_transaction_is_classified_by_reply_code(
    sink: SmtpSink,
    provider: SmtpProvider,
    faults: Faults,
    failure: type[Exception],
    status: int,
) -> None:
    """Callers decide retry by type (HOUSE rule 8): 4xx is temporary, 5xx permanent."""
    sink.faults = faults
    with pytest.raises(failure) as caught:
        await provider.send(make_envelope("a@example.com"))
    assert isinstance(caught.value, TemporaryFailure | PermanentFailure)
    assert caught.value.status == status
    assert "refused" in str(caught.value)
    assert "try later" not in str(caught.value)
    assert sink.messages == []
    # After a 5xx and RSET the connection is clean and is reused; after a 4xx (the relay
    # deferring us) the next message goes out on a fresh connection.
    sink.faults = Faults()
    await provider.send(make_envelope("a@example.com"))
    assert sink.connections_accepted == (2 if failure is TemporaryFailure else 1)


async def test_failure_details_never_carry_addresses_or_reply_text(
    sink: SmtpSink, provider: SmtpProvider
) -> None:
    """Exceptions end up in logs and job rows; relays echo the address in their reply text."""
    sink.faults = Faults(data_reply="554 5.7.1 <a@example.com> looks like spam")
    with pytest.raises(PermanentFailure) as caught:
        await provider.send(make_envelope("a@example.com"))
    assert "example.com" not in str(caught.value)
    assert "spam" not in str(caught.value)
    assert "554 5.7.1" in str(caught.value)


async def test_disconnect_during_data_is_uncertain_and_never_resent(sink: SmtpSink) -> None:
    """After DATA the relay may have taken the message: replaying it could mail twice, so
    the outcome is reported as uncertain, not as a failure worth retrying."""
    smtp = make_provider(sink, pool_size=1)
    try:
        await smtp.send(make_envelope("a@example.com"))
        sink.faults = Faults(disconnect_during_data=True)
        with pytest.raises(UncertainDelivery):
            await smtp.send(make_envelope("b@example.com"))
        assert sink.data_commands == 2
        sink.faults = Faults()
        await smtp.send(make_envelope("c@example.com"))
        assert sink.connections_accepted == 2
        assert [m.recipients for m in sink.messages] == [("a@example.com",), ("c@example.com",)]
    finally:
        await smtp.close()


@pytest.mark.parametrize("command", ["MAIL", "RCPT", "DATA"])
async def test_reply_slower_than_the_timeout_is_temporary_and_not_replayed(
    sink: SmtpSink, command: str
) -> None:
    """A hung relay must not hold a worker past its lease, and slow is not the same as dead."""
    # A reply timeout well above a loaded test machine's stalls (CI once saw the replies before
    # DATA take over 0.5 s), and a hang far longer than it: the send ends at the timeout.
    provider = make_provider(sink, timeout_seconds=2.0)
    try:
        await provider.send(make_envelope("a@example.com"))
        sink.faults = Faults(delay_seconds=12.0, delay_commands=frozenset({command}))
        started = time.monotonic()
        # Before DATA nothing can have been accepted; after it, maybe: uncertain, never retried.
        expected = UncertainDelivery if command == "DATA" else TemporaryFailure
        with pytest.raises(expected, match="timed out"):
            await provider.send(make_envelope("b@example.com"))
        assert time.monotonic() - started < 8.0
        assert sink.connections_accepted == 1
        sink.faults = Faults()
        await provider.send(make_envelope("c@example.com"))
        assert sink.connections_accepted == 2
        assert [m.recipients for m in sink.messages] == [("a@example.com",), ("c@example.com",)]
    finally:
        await provider.close()


async def test_connection_refused_is_temporary() -> None:
    """A relay that is down is an outage, not a reason to bounce the recipient."""
    smtp = SmtpProvider(
        host="127.0.0.1", port=free_port(), security="none", timeout_seconds=TIMEOUT
    )
    try:
        with pytest.raises(TemporaryFailure):
            await smtp.send(make_envelope("a@example.com"))
    finally:
        await smtp.close()


async def test_send_after_sink_restart_reconnects(sink: SmtpSink, provider: SmtpProvider) -> None:
    """Relays restart; pooled connections die with them and must be replaced quietly."""
    await provider.send(make_envelope("a@example.com"))
    await sink.stop()
    await sink.start()
    result = await provider.send(make_envelope("b@example.com"))
    assert list(result.accepted) == ["b@example.com"]
    assert sink.connections_accepted == 2


async def test_idle_connection_dropped_unnoticed_is_replaced_once_without_double_send(
    sink: SmtpSink,
) -> None:
    """A relay's idle timeout closes pooled connections; the first command finds out."""
    smtp = make_provider(sink, pool_size=1)
    try:
        await smtp.send(make_envelope("a@example.com"))
        assert sink.drop_connections() == 1
        # No await in between: the client has not seen the close when it sends MAIL.
        result = await smtp.send(make_envelope("b@example.com"))
        assert list(result.accepted) == ["b@example.com"]
        assert sink.connections_accepted == 2
        assert sink.data_commands == 2
        assert len(sink.messages) == 2
    finally:
        await smtp.close()


async def test_close_quits_pooled_connections(sink: SmtpSink) -> None:
    """Workers shutting down must not leave connections for the relay to time out."""
    smtp = make_provider(sink, pool_size=2)
    await asyncio.gather(*(smtp.send(make_envelope(f"u{n}@example.com")) for n in range(4)))
    assert sink.open_connections >= 1
    await smtp.close()
    # QUIT was answered, and the sink closes its side before it answers.
    assert sink.open_connections == 0
    with pytest.raises(TemporaryFailure):
        await smtp.send(make_envelope("late@example.com"))


async def test_authenticates_with_configured_credentials() -> None:
    """Most relays (SES, Postmark, a smarthost) require AUTH before MAIL."""
    async with SmtpSink(clock=utcnow, credentials=("relay-user", "s3cret")) as sink:
        smtp = make_provider(sink, username="relay-user", password="s3cret")
        try:
            await smtp.send(make_envelope("a@example.com"))
        finally:
            await smtp.close()
        assert len(sink.messages) == 1


async def test_wrong_credentials_refuse_the_sender_not_the_recipient() -> None:
    """A configuration mistake must not permanently bounce every recipient of a campaign, nor
    be retried like an outage: it is the sender refused (the send pauses, issue 35 item 9)."""
    async with SmtpSink(clock=utcnow, credentials=("relay-user", "s3cret")) as authenticating:
        smtp = make_provider(authenticating, username="relay-user", password="wrong")
        try:
            with pytest.raises(SenderRefused) as caught:
                await smtp.send(make_envelope("a@example.com"))
        finally:
            await smtp.close()
        assert caught.value.status == 535
        assert authenticating.messages == []


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, made with the openssl command."""
    return self_signed_certificate(tmp_path_factory.mktemp("tls"))


@pytest.mark.parametrize("security", ["starttls", "tls"])
async def test_sends_over_verified_tls(certificate: tuple[Path, Path], security: str) -> None:
    """Credentials and messages cross the network to the relay; both modes must really encrypt."""
    cert, key = certificate
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    client_context = ssl.create_default_context(cafile=str(cert))
    sink = SmtpSink(
        clock=utcnow,
        tls_context=server_context,
        implicit_tls=security == "tls",
        credentials=("relay-user", "s3cret"),
    )
    async with sink:
        smtp = make_provider(
            sink,
            security=security,
            tls_context=client_context,
            username="relay-user",
            password="s3cret",
        )
        try:
            await smtp.send(make_envelope("a@example.com"))
        finally:
            await smtp.close()
        assert len(sink.messages) == 1
