"""SMTP command pipelining (RFC 2920) against a scripted relay on loopback: used exactly when
the relay offers it, never when it does not."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from tidings.delivery.provider import Envelope, TemporaryFailure
from tidings.delivery.smtp import SmtpProvider

TIMEOUT = 0.5
MESSAGE = b"Subject: hi\r\n\r\n.dot line\r\nbody\r\n"
Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def relay(pipelining: bool, script: Script) -> AsyncIterator[int]:
    """A relay that greets, answers EHLO (offering PIPELINING or not), then runs `script`."""

    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"220 relay ready\r\n")
        await reader.readline()  # EHLO
        offered = b"250-PIPELINING\r\n" if pipelining else b""
        writer.write(b"250-relay\r\n" + offered + b"250 8BITMIME\r\n")
        try:
            await script(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(session, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


def provider(port: int) -> SmtpProvider:
    return SmtpProvider(
        host="127.0.0.1",
        port=port,
        security="none",
        timeout_seconds=TIMEOUT,
        pool_size=1,
        local_hostname="tests.invalid",
    )


def envelope() -> Envelope:
    return Envelope(
        sender="news@example.com",
        recipients=["a@example.com", "b@example.com"],
        data=MESSAGE,
        message_id="<m@example.com>",
    )


async def accept_and_quit(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reply: bytes = b"250 queued"
) -> bytes:
    """Read the content to its terminating dot, accept it, answer QUIT; returns the content."""
    data = await reader.readuntil(b"\r\n.\r\n")
    writer.write(reply + b"\r\n")
    await reader.readline()  # QUIT
    writer.write(b"221 bye\r\n")
    return data


async def test_a_relay_that_pipelines_gets_mail_rcpt_and_data_before_it_answers() -> None:
    """One round trip before the content instead of four: the relay here answers nothing
    until the whole group has arrived, so a client waiting for each reply would time out."""
    received: list[bytes] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        group = [await reader.readline() for _ in range(4)]  # MAIL, RCPT, RCPT, DATA
        received.extend(group)
        writer.write(b"250 2.1.0 ok\r\n250 2.1.5 ok\r\n250 2.1.5 ok\r\n354 go on\r\n")
        received.append(await accept_and_quit(reader, writer, b"250 2.0.0 queued as ABC123"))

    async with relay(True, script) as port:
        smtp = provider(port)
        result = await smtp.send(envelope())
        await smtp.close()
    assert list(result.accepted) == ["a@example.com", "b@example.com"]
    assert result.provider_message_id == "ABC123"
    assert received[:4] == [
        b"MAIL FROM:<news@example.com>\r\n",
        b"RCPT TO:<a@example.com>\r\n",
        b"RCPT TO:<b@example.com>\r\n",
        b"DATA\r\n",
    ]
    # The content is dot-stuffed and terminated exactly as RFC 5321 4.5.2 asks.
    assert received[4] == b"Subject: hi\r\n\r\n..dot line\r\nbody\r\n.\r\n"


async def test_a_relay_that_does_not_offer_pipelining_gets_one_command_at_a_time() -> None:
    """RFC 2920: a client may pipeline only when the relay advertised it; an old relay reading
    one line and answering would mix up the replies of commands sent ahead."""
    early: list[bytes] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for reply in (b"250 ok", b"250 ok", b"250 ok", b"354 go on"):
            await reader.readline()
            # Anything more before this command is answered was sent ahead.
            with contextlib.suppress(TimeoutError):
                early.append(await asyncio.wait_for(reader.read(1), 0.1))
            writer.write(reply + b"\r\n")
        await accept_and_quit(reader, writer)

    async with relay(False, script) as port:
        smtp = provider(port)
        result = await smtp.send(envelope())
        await smtp.close()
    assert early == []
    assert list(result.accepted) == ["a@example.com", "b@example.com"]


async def test_pipelined_refusals_are_read_reply_by_reply() -> None:
    """Every reply of the group is matched to its own command: a refused RCPT is that
    recipient's, and the message still goes to the other."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(4):
            await reader.readline()
        # The replies split across writes, one multiline: they must still pair up.
        writer.write(b"250-2.1.0 sender\r\n250 2.1.0 ok\r\n550 5.1.1 no")
        await writer.drain()
        await asyncio.sleep(0.01)
        writer.write(b" such user\r\n250 2.1.5 ok\r\n354 go on\r\n")
        await accept_and_quit(reader, writer)

    async with relay(True, script) as port:
        smtp = provider(port)
        result = await smtp.send(envelope())
        await smtp.close()
    assert list(result.accepted) == ["b@example.com"]
    assert result.rejected["a@example.com"].status == 550
    assert result.rejected["a@example.com"].permanent is True


async def test_a_relay_that_opens_data_with_every_recipient_refused_gets_no_content() -> None:
    """A lax relay may answer 354 to a pipelined DATA although it refused every RCPT: the
    client ends the data at once (RFC 2920 3.1), so nothing is sent to anyone."""
    after: list[bytes] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(4):
            await reader.readline()
        writer.write(b"250 ok\r\n550 no\r\n550 no\r\n354 go on\r\n")
        after.append(await reader.readline())  # the lone dot
        writer.write(b"554 no valid recipients\r\n")
        after.append(await reader.readline())  # RSET
        writer.write(b"250 ok\r\n")
        await reader.readline()
        writer.write(b"221 bye\r\n")

    async with relay(True, script) as port:
        smtp = provider(port)
        result = await smtp.send(envelope())
        await smtp.close()
    assert list(result.accepted) == []
    assert set(result.rejected) == {"a@example.com", "b@example.com"}
    assert after == [b".\r\n", b"RSET\r\n"]


@pytest.mark.parametrize("pipelining", [True, False])
async def test_a_relay_closing_before_any_reply_is_a_temporary_failure(pipelining: bool) -> None:
    """Nothing was handed over, so the message is retried later, never marked sent."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()

    async with relay(pipelining, script) as port:
        smtp = provider(port)
        with pytest.raises(TemporaryFailure):
            await smtp.send(envelope())
        await smtp.close()
