"""A relay's refusal of the sender, told apart from its refusal of a recipient (issue 35 item 9,
HOUSE rule 8): relaying denied, authentication required or refused, the same refusal for
several recipient domains, a login or a certificate refused at connect all raise
`SenderRefused`, named the way `tidings smtp check` names them; a 5.1.1 "user unknown" stays
the recipient's own. Against the real sink on loopback (the outside review used Postfix with
no credentials, which answered every RCPT `554 5.7.1 <x@y>: Relay access denied`)."""

from __future__ import annotations

import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.tls import client_context, self_signed_certificate, server_context
from tidings.bootstrap import utcnow
from tidings.delivery.connection_check import check_smtp
from tidings.delivery.provider import Envelope, ProviderUnreachable, SenderRefused
from tidings.delivery.smtp import SmtpProvider
from tidings.delivery.smtp_failures import SAME_REFUSAL_DOMAINS, connect_failure
from tidings.devservers.sink import Faults, SmtpSink

RELAY_DENIED = "554 5.7.1 <{}>: Relay access denied"


def _envelope(recipient: str) -> Envelope:
    data = b"From: news@example.com\r\nSubject: Hi\r\nMessage-ID: <m@example.com>\r\n\r\nHi.\r\n"
    return Envelope("news@example.com", [recipient], data, "<m@example.com>")


def _provider(port: int, **overrides: Any) -> SmtpProvider:
    return SmtpProvider(host="127.0.0.1", port=port, timeout_seconds=2.0, **overrides)


@pytest.fixture(params=[True, False], ids=["pipelining", "one-at-a-time"])
async def provider(request: pytest.FixtureRequest) -> AsyncIterator[tuple[SmtpSink, SmtpProvider]]:
    """A relay on loopback, with PIPELINING offered or not, and the provider sending to it."""
    async with SmtpSink(clock=utcnow, pipelining=request.param) as sink:
        smtp = _provider(sink.port, security="none")
        yield sink, smtp
        await smtp.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed_certificate(tmp_path_factory.mktemp("tls"))


async def test_relay_access_denied_refuses_the_sender_named_without_the_address(
    provider: tuple[SmtpSink, SmtpProvider],
) -> None:
    """The outside reproduction: Postfix without credentials answers every RCPT with 554 5.7.1
    Relay access denied. That is the relay refusing us, not the reader: it must not come back
    as the reader's permanent rejection, and the cause names it with the relay, not the text."""
    sink, smtp = provider
    sink.faults = Faults(rcpt_replies={"": "554 5.7.1 <ann@example.org>: Relay access denied"})
    with pytest.raises(SenderRefused) as caught:
        await smtp.send(_envelope("ann@example.org"))
    assert caught.value.cause == "relaying denied, 554 5.7.1"
    assert caught.value.endpoint == f"127.0.0.1:{sink.port}"
    assert "example.org" not in str(caught.value)
    assert sink.messages == []


async def test_authentication_required_at_mail_refuses_the_sender() -> None:
    """A relay that wants a login nobody configured answers MAIL with 530 5.7.0: every message
    would be refused alike, so it is the sender's problem, never a recipient's."""
    async with SmtpSink(clock=utcnow, credentials=("user", "secret")) as guarded:
        smtp = _provider(guarded.port, security="none")
        try:
            with pytest.raises(SenderRefused) as caught:
                await smtp.send(_envelope("ann@example.org"))
        finally:
            await smtp.close()
    assert caught.value.cause == "authentication required or refused, 530 5.7.0"
    assert caught.value.status == 530


async def test_the_same_refusal_for_several_domains_refuses_the_sender_but_user_unknown_never(
    provider: tuple[SmtpSink, SmtpProvider],
) -> None:
    """A policy refusal without the words "relay" or "authentication" is still the sender's
    when the same code comes back for several domains with nothing accepted between; 5.1.1
    "user unknown" stays each recipient's own, however many domains return it, and a single
    policy refusal after the relay has accepted mail stays the recipient's too."""
    sink, smtp = provider
    assert (await smtp.send(_envelope("first@example.net"))).accepted  # accepted once
    sink.faults = Faults(rcpt_replies={"": "550 5.1.1 User unknown"})
    for number in range(SAME_REFUSAL_DOMAINS + 2):
        result = await smtp.send(_envelope(f"gone@domain{number}.example"))
        assert list(result.rejected) == [f"gone@domain{number}.example"]
        assert result.rejected[f"gone@domain{number}.example"].permanent
    sink.faults = Faults(rcpt_replies={"": "550 5.7.1 Message refused by policy"})
    for number in range(SAME_REFUSAL_DOMAINS - 1):
        result = await smtp.send(_envelope(f"reader@policy{number}.example"))
        assert list(result.rejected) == [f"reader@policy{number}.example"]
    with pytest.raises(SenderRefused) as caught:
        await smtp.send(_envelope("reader@policy-last.example"))
    assert caught.value.cause == (
        f"the same refusal for {SAME_REFUSAL_DOMAINS} recipient domains, 550 5.7.1"
    )
    sink.faults = Faults()  # the relay fixed: an acceptance starts the count again
    assert (await smtp.send(_envelope("back@example.net"))).accepted
    sink.faults = Faults(rcpt_replies={"": "550 5.7.1 Message refused by policy"})
    result = await smtp.send(_envelope("reader@policy0.example"))
    assert list(result.rejected) == ["reader@policy0.example"]


async def test_a_policy_refusal_before_anything_was_accepted_refuses_the_sender(
    provider: tuple[SmtpSink, SmtpProvider],
) -> None:
    """A 5.7.x refusal of the very first message a relay is asked to take says nothing about
    the reader and everything about us: it must not be written down as her failure."""
    sink, smtp = provider
    sink.faults = Faults(rcpt_replies={"": "550 5.7.1 Not authorised"})
    with pytest.raises(SenderRefused) as caught:
        await smtp.send(_envelope("ann@example.org"))
    assert caught.value.cause == "policy refusal before any recipient was accepted, 550 5.7.1"


async def test_connection_faults_are_named_as_smtp_check_names_them(
    certificate: tuple[Path, Path],
) -> None:
    """A refused login, a certificate not trusted, TLS from the first byte against a relay that
    speaks plain SMTP first, STARTTLS missing: configuration mistakes no retry mends, so they
    refuse the sender (the send pauses) with the same words `tidings smtp check` prints; a
    closed port may be an outage, so it stays unreachable, retried."""
    trusted = client_context(certificate)
    starttls = SmtpSink(
        clock=utcnow, tls_context=server_context(certificate), credentials=("user", "secret")
    )
    async with starttls, SmtpSink(clock=utcnow) as plain:
        cases = [
            (
                starttls.port,
                {"security": "starttls", "tls_context": trusted, "username": "user",
                 "password": "wrong"},
                "authentication refused, 535 5.7.8",
            ),
            (starttls.port, {"security": "starttls"}, "certificate not trusted: self-signed"),
            (
                plain.port,
                {"security": "tls", "tls_context": trusted},
                "TLS from the first byte against a relay that speaks plain SMTP first",
            ),
            (plain.port, {"security": "starttls", "tls_context": trusted}, "STARTTLS not offered"),
        ]  # fmt: skip
        for port, options, cause in cases:
            smtp = _provider(port, **{"security": "none", **options})
            try:
                with pytest.raises(SenderRefused) as caught:
                    await smtp.send(_envelope("ann@example.org"))
            finally:
                await smtp.close()
            assert caught.value.cause.startswith(cause), (options, caught.value.cause)
            assert caught.value.endpoint == f"127.0.0.1:{port}"
            check_options = {key: value for key, value in options.items() if key != "tls_context"}
            check = await check_smtp(
                host="127.0.0.1",
                port=port,
                username=check_options.pop("username", None),
                password=check_options.pop("password", None),
                timeout_seconds=2.0,
                tls_context=options.get("tls_context"),
                **check_options,
            )
            assert not check.ok
            assert check.steps[-1].detail.startswith(caught.value.cause), check.steps[-1]
        assert starttls.messages == plain.messages == []
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = int(probe.getsockname()[1])
    smtp = _provider(closed, security="none")
    with pytest.raises(ProviderUnreachable) as unreachable:
        await smtp.send(_envelope("ann@example.org"))
    await smtp.close()
    assert not isinstance(unreachable.value, SenderRefused)
    assert unreachable.value.cause == "connection refused"
    assert unreachable.value.endpoint == f"127.0.0.1:{closed}"


@pytest.mark.parametrize(
    ("reason", "lasting"),
    [("NO_SHARED_CIPHER", True), ("TLSV1_ALERT_PROTOCOL_VERSION", True),
     ("UNEXPECTED_EOF_WHILE_READING", False), (None, False)],
)  # fmt: skip
def test_only_a_tls_handshake_that_cannot_agree_pauses_the_send(
    reason: str | None, lasting: bool
) -> None:
    """A handshake with no protocol or cipher in common fails the same way every time, so the
    send pauses; a handshake cut short may be the network's, and must be retried as an outage
    rather than stop a campaign until someone looks."""
    failure = ssl.SSLError(1, "handshake failed")
    failure.reason = reason
    fault = connect_failure(failure, security="starttls", timeout_seconds=1.0)
    assert fault.lasting is lasting
    assert fault.cause == f"TLS failed: {reason or 'SSLError'}"
