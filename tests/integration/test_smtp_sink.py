"""The SMTP sink injects the faults it is told to, stores what it accepts (PRV-4, dev-smtp).

These drive the sink with aiosmtplib directly, so a fault that silently stopped working would
show up here and not as a provider test that passes for the wrong reason.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiosmtplib
import pytest

from tidings.bootstrap import utcnow
from tidings.devservers.sink import Faults, SmtpSink

TIMEOUT = 0.5
MESSAGE = b"Subject: hi\r\n\r\nbody line\r\n"


@pytest.fixture
async def sink() -> AsyncIterator[SmtpSink]:
    async with SmtpSink(clock=utcnow) as running:
        yield running


@pytest.fixture
async def client(sink: SmtpSink) -> AsyncIterator[aiosmtplib.SMTP]:
    smtp = aiosmtplib.SMTP(
        hostname=sink.host,
        port=sink.port,
        start_tls=False,
        timeout=TIMEOUT,
        local_hostname="tests.invalid",
    )
    await smtp.connect()
    yield smtp
    smtp.close()


async def test_port_zero_binds_a_free_port_that_a_restart_keeps(sink: SmtpSink) -> None:
    """Parallel tests need their own port; a restart must come back where clients point."""
    port = sink.port
    assert port > 0
    await sink.stop()
    await sink.start()
    assert sink.port == port


async def test_address_markers_trigger_rcpt_replies(
    sink: SmtpSink, client: aiosmtplib.SMTP
) -> None:
    """Markers in addresses reach a sink in another process (`tidings dev-smtp`, benchmarks)."""
    await client.mail("news@example.com")
    with pytest.raises(aiosmtplib.SMTPRecipientRefused) as rejected:
        await client.rcpt("bob+reject550@example.com")
    assert rejected.value.code == 550
    assert rejected.value.message.startswith("5.1.1")
    with pytest.raises(aiosmtplib.SMTPRecipientRefused) as deferred:
        await client.rcpt("carol+defer451@example.com")
    assert deferred.value.code == 451
    await client.rcpt("dave@example.com")
    await client.data(MESSAGE)
    [received] = await sink.wait_for(1, TIMEOUT)
    assert received.recipients == ("dave@example.com",)


async def test_custom_rcpt_markers_replace_the_defaults(
    sink: SmtpSink, client: aiosmtplib.SMTP
) -> None:
    """Benchmarks pick their own markers; the markers only look at the local part."""
    sink.faults = Faults(rcpt_replies={"+full": "452 4.2.2 Mailbox full"})
    await client.mail("news@example.com")
    with pytest.raises(aiosmtplib.SMTPRecipientRefused) as full:
        await client.rcpt("erin+full@example.com")
    assert full.value.code == 452
    await client.rcpt("bob+reject550@example.com")
    await client.rcpt("frank@mail+full.example.com")


async def test_mail_reply_fault_applies_and_can_be_lifted_while_running(
    sink: SmtpSink, client: aiosmtplib.SMTP
) -> None:
    """Tests flip faults mid-run to see a provider recover on the same connection."""
    sink.faults = Faults(mail_reply="451 4.3.0 try later")
    with pytest.raises(aiosmtplib.SMTPSenderRefused) as refused:
        await client.sendmail("news@example.com", ["a@example.com"], MESSAGE)
    assert refused.value.code == 451
    sink.faults = Faults()
    await client.sendmail("news@example.com", ["a@example.com"], MESSAGE)
    assert len(sink.messages) == 1


async def test_data_reply_fault_refuses_and_stores_nothing(
    sink: SmtpSink, client: aiosmtplib.SMTP
) -> None:
    """A refused message must not appear as delivered in the sink's record."""
    sink.faults = Faults(data_reply="554 5.7.1 rejected")
    with pytest.raises(aiosmtplib.SMTPDataError) as refused:
        await client.sendmail("news@example.com", ["a@example.com"], MESSAGE)
    assert refused.value.code == 554
    assert sink.messages == []
    assert sink.data_commands == 1


async def test_disconnect_during_data_drops_before_replying(
    sink: SmtpSink, client: aiosmtplib.SMTP
) -> None:
    """The ambiguous case (did the relay take it?) must be reproducible on demand."""
    sink.faults = Faults(disconnect_during_data=True)
    with pytest.raises(aiosmtplib.SMTPServerDisconnected):
        await client.sendmail("news@example.com", ["a@example.com"], MESSAGE)
    assert sink.messages == []
    assert sink.data_commands == 1


async def test_delay_slows_only_the_chosen_commands(
    sink: SmtpSink, client: aiosmtplib.SMTP
) -> None:
    """Timeout handling is tested by making exactly one command slow. The bound is the
    delay itself (MAIL or RCPT delayed would take at least that long), not a guess at how
    fast a loaded machine answers."""
    delay = 1.0
    sink.faults = Faults(delay_seconds=delay, delay_commands=frozenset({"DATA"}))
    started = time.monotonic()
    await client.mail("news@example.com")
    await client.rcpt("a@example.com")
    assert time.monotonic() - started < delay
    data_started = time.monotonic()
    await client.data(MESSAGE, timeout=delay * 5)
    assert time.monotonic() - data_started >= delay


async def test_fail_every_nth_refuses_a_deterministic_share(
    sink: SmtpSink, client: aiosmtplib.SMTP
) -> None:
    """Benchmarks need a failure rate that repeats exactly from run to run."""
    sink.faults = Faults(fail_every_nth=3)
    outcomes = []
    for n in range(6):
        try:
            await client.sendmail("news@example.com", [f"u{n}@example.com"], MESSAGE)
            outcomes.append("ok")
        except aiosmtplib.SMTPDataError as exc:
            outcomes.append(str(exc.code))
    assert outcomes == ["ok", "ok", "451", "ok", "ok", "451"]
    assert len(sink.messages) == 4


async def test_auth_is_required_when_credentials_are_configured() -> None:
    """Lets the provider's AUTH path run against a server that really enforces it."""
    async with SmtpSink(clock=utcnow, credentials=("user", "pass")) as sink:
        smtp = aiosmtplib.SMTP(hostname=sink.host, port=sink.port, start_tls=False, timeout=TIMEOUT)
        await smtp.connect()
        try:
            with pytest.raises(aiosmtplib.SMTPSenderRefused) as refused:
                await smtp.mail("news@example.com")
            assert refused.value.code == 530
            with pytest.raises(aiosmtplib.SMTPAuthenticationError):
                await smtp.login("user", "wrong")
            await smtp.login("user", "pass")
            await smtp.sendmail("news@example.com", ["a@example.com"], MESSAGE)
        finally:
            smtp.close()
        assert len(sink.messages) == 1


async def test_store_dir_gets_one_eml_file_per_accepted_message(tmp_path: Path) -> None:
    """`tidings dev-smtp --store DIR` lets a developer open what was sent in a mail client."""
    store = tmp_path / "outbox"
    async with SmtpSink(clock=utcnow, store_dir=store) as sink:
        smtp = aiosmtplib.SMTP(hostname=sink.host, port=sink.port, start_tls=False, timeout=TIMEOUT)
        await smtp.connect()
        try:
            await smtp.sendmail("news@example.com", ["a@example.com"], MESSAGE)
            sink.faults = Faults(data_reply="554 5.7.1 rejected")
            with pytest.raises(aiosmtplib.SMTPDataError):
                await smtp.sendmail("news@example.com", ["b@example.com"], MESSAGE)
        finally:
            smtp.close()
    files = sorted(store.iterdir())
    assert [path.suffix for path in files] == [".eml"]
    assert files[0].read_bytes() == MESSAGE


async def test_wait_for_times_out_when_too_few_messages_arrive(
    sink: SmtpSink, client: aiosmtplib.SMTP
) -> None:
    """A test waiting for mail that never comes must fail fast, saying how many came."""
    await client.sendmail("news@example.com", ["a@example.com"], MESSAGE)
    assert len(await sink.wait_for(1, TIMEOUT)) == 1
    with pytest.raises(TimeoutError, match="1 of 2"):
        await sink.wait_for(2, 0.05)


async def test_stop_closes_client_connections(sink: SmtpSink, client: aiosmtplib.SMTP) -> None:
    """A restarted relay leaves clients holding dead connections; the sink must reproduce that."""
    await client.noop()
    assert sink.open_connections == 1
    await sink.stop()
    assert sink.open_connections == 0
    with pytest.raises(aiosmtplib.SMTPServerDisconnected):
        await client.noop()
