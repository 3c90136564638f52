"""`tidings inbound` has limits (issue 35 item 4): the MX takes mail from anyone, so what one
client can cost the receiver is bounded — connections in all and per client, idle and whole
session time, recipients per message, message size, line length.

These drive a real receiver (aiosmtpd on loopback) with raw sockets and aiosmtplib, as the
outside review did against `tidings inbound`; what it stores goes to a list instead of the
database, which the limits never reach.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiosmtplib
import pytest

from tests.support.waiting import wait_for
from tidings.delivery.inbound_server import InboundServer, SessionLimits, client_of

BOUNCES = "bounces@mail.example.org"
MESSAGE = b"From: mailer-daemon@mx.example.net\r\nSubject: bounce\r\n\r\nbody\r\n"
Connect = Callable[..., Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


@asynccontextmanager
async def receiver(
    limits: SessionLimits, *, max_bytes: int = 262_144
) -> AsyncIterator[tuple[InboundServer, list[list[str]]]]:
    """A receiver for the bounce domain with `limits`, and the recipients of each message."""
    delivered: list[list[str]] = []

    async def deliver(recipients: list[str], data: bytes) -> None:
        delivered.append(recipients)

    server = InboundServer(
        accepts=lambda address: address.endswith("@mail.example.org"),
        deliver=deliver,
        max_bytes=max_bytes,
        limits=limits,
    )
    async with server:
        yield server, delivered


@asynccontextmanager
async def connections() -> AsyncIterator[Connect]:
    """Raw client connections (`connect(port, source=...)`), all closed at the end."""
    writers: list[asyncio.StreamWriter] = []

    async def connect(
        port: int, *, source: str = "127.0.0.1"
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        writers.append(writer)
        return reader, writer

    try:
        yield connect
    finally:
        for writer in writers:
            writer.close()


async def greeting(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.readline(), timeout=10)


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything the server still sends until it closes the connection."""
    return await asyncio.wait_for(reader.read(), timeout=10)


async def test_a_client_over_its_connection_cap_gets_421_while_another_client_gets_in() -> None:
    """One client opening connection after connection (the review: 1,500 idle ones) must not
    hold the receiver: past its cap it is told 421 and closed, while a relay at another
    address still delivers; a connection it closes frees its place."""
    limits = SessionLimits(max_connections_per_client=2)
    async with receiver(limits) as (server, _), connections() as connect:
        first = [await connect(server.port) for _ in range(2)]
        for reader, _ in first:
            assert (await greeting(reader)).startswith(b"220 ")
        reader, _ = await connect(server.port)
        refused = await closed_by_server(reader)
        assert refused.startswith(b"421 4.7.0 "), refused
        other, _ = await connect(server.port, source="127.0.0.2")
        assert (await greeting(other)).startswith(b"220 ")
        first[0][1].close()
        await wait_for(
            lambda: asyncio.sleep(0, server.open_connections == 2),
            message="the closed connection was never released",
        )
        again, _ = await connect(server.port)
        assert (await greeting(again)).startswith(b"220 ")


async def test_past_the_total_connection_cap_every_client_gets_421() -> None:
    """Many clients together are bounded too: past `max_connections` a new one is refused."""
    limits = SessionLimits(max_connections=2)
    async with receiver(limits) as (server, _), connections() as connect:
        for source in ("127.0.0.2", "127.0.0.3"):
            reader, _ = await connect(server.port, source=source)
            assert (await greeting(reader)).startswith(b"220 ")
        reader, _ = await connect(server.port, source="127.0.0.4")
        assert (await closed_by_server(reader)).startswith(b"421 ")


async def test_an_idle_connection_is_closed_after_the_idle_timeout() -> None:
    """An idle connection holds memory and a place under the caps: it is dropped after the
    idle timeout (aiosmtpd's default was 5 minutes)."""
    async with receiver(SessionLimits(idle_timeout_seconds=0.5)) as (server, _):
        async with connections() as connect:
            reader, _ = await connect(server.port)
            assert (await greeting(reader)).startswith(b"220 ")
            assert await closed_by_server(reader) == b""
        assert server.open_connections == 0


async def test_a_session_that_keeps_talking_ends_at_the_session_timeout() -> None:
    """A client that keeps the idle timer reset (NOOP, RSET, MAIL...) would hold its place
    forever: the whole session is cut at the session timeout with a 421."""
    limits = SessionLimits(session_timeout_seconds=1.0, idle_timeout_seconds=30)
    async with receiver(limits) as (server, _):
        client = aiosmtplib.SMTP(hostname="127.0.0.1", port=server.port, timeout=10)
        await client.connect()
        with pytest.raises(aiosmtplib.SMTPServerDisconnected):
            await wait_for(
                lambda: _keep_talking(client),
                within_seconds=20,
                message="the session was never ended",
            )
        assert server.open_connections == 0


async def _keep_talking(client: aiosmtplib.SMTP) -> bool:
    """One RSET (a command that resets the idle timer but is never limited in number)."""
    await client.rset()
    return False


async def test_a_client_repeating_commands_that_move_no_mail_is_cut_off() -> None:
    """NOOP resets the idle timer and costs a reply each time: past 20 in one connection
    (5 for HELP, VRFY, EXPN, HELO, EHLO, LHLO and AUTH) the client is told 421 and closed."""
    async with receiver(SessionLimits()) as (server, _):
        client = aiosmtplib.SMTP(hostname="127.0.0.1", port=server.port, timeout=10)
        await client.connect()
        replies = [(await client.noop()).code for _ in range(20)]
        assert replies == [250] * 20
        with pytest.raises(aiosmtplib.SMTPResponseException) as refused:
            await client.noop()
        assert refused.value.code == 421
        await wait_for(
            lambda: asyncio.sleep(0, server.open_connections == 0),
            message="the connection stayed open",
        )


async def test_recipients_past_the_cap_get_452_and_the_message_reaches_the_others() -> None:
    """RFC 5321 4.5.3.1.10: past the recipient cap the server answers 452 and the client
    sends the rest in another transaction; the message still reaches the ones accepted.
    The review sent one message with 2,000 RCPT."""
    async with receiver(SessionLimits(max_recipients=3)) as (server, delivered):
        client = aiosmtplib.SMTP(hostname="127.0.0.1", port=server.port, timeout=10)
        async with client:
            await client.ehlo()
            await client.mail("")
            replies = [await client.execute_command(b"RCPT", b"TO:<" + BOUNCES.encode() + b">")]
            for number in range(5):
                command = f"TO:<bounces+{number}@mail.example.org>".encode()
                replies.append(await client.execute_command(b"RCPT", command))
            assert [reply.code for reply in replies] == [250, 250, 250, 452, 452, 452]
            assert replies[-1].message.startswith("4.5.3 Too many recipients")
            assert (await client.data(MESSAGE)).code == 250
        assert delivered == [[BOUNCES, "bounces+0@mail.example.org", "bounces+1@mail.example.org"]]


async def test_an_oversize_message_is_refused_with_552_and_nothing_is_stored() -> None:
    """A message over the size limit is refused whole (552), declared by SIZE or not, and
    its content is not kept in memory meanwhile."""
    async with receiver(SessionLimits(), max_bytes=4096) as (server, delivered):
        client = aiosmtplib.SMTP(hostname="127.0.0.1", port=server.port, timeout=10)
        async with client:
            await client.ehlo()
            declared = await client.execute_command(b"MAIL", b"FROM:<> SIZE=100000")
            assert declared.code == 552
            await client.mail("")
            await client.rcpt(BOUNCES)
            with pytest.raises(aiosmtplib.SMTPDataError) as refused:
                await client.data(MESSAGE + (b"x" * 76 + b"\r\n") * 100)
            assert refused.value.code == 552
        assert delivered == []


async def test_an_endless_line_is_cut_off_instead_of_filling_memory() -> None:
    """aiosmtpd refuses a line over 1,000 octets only once the line ends, keeping its
    pieces until then: a client sending one endless line would grow the receiver's memory
    without bound. Past 64 KB without a line ending the connection is closed."""
    async with receiver(SessionLimits()) as (server, delivered), connections() as connect:
        reader, writer = await connect(server.port)
        assert (await greeting(reader)).startswith(b"220 ")
        writer.write(b"HELO relay.example.net\r\nMAIL FROM:<>\r\n")
        writer.write(f"RCPT TO:<{BOUNCES}>\r\nDATA\r\n".encode())
        await writer.drain()
        try:
            for _ in range(2048):  # 2 MB, far past the cut-off
                writer.write(b"z" * 1024)
                await writer.drain()
        except ConnectionError:
            pass  # the receiver hung up, as it should
        await wait_for(
            lambda: asyncio.sleep(0, server.open_connections == 0),
            within_seconds=10,
            message="the receiver kept reading the endless line",
        )
        assert delivered == []


@pytest.mark.parametrize(
    ("peer", "client"),
    [
        (("192.0.2.7", 25), "192.0.2.7"),
        (("2001:db8:1:2:aaaa::1", 25, 0, 0), "2001:db8:1:2::/64"),
        (("2001:db8:1:2:ffff::9", 25, 0, 0), "2001:db8:1:2::/64"),
        (("::ffff:192.0.2.7", 25, 0, 0), "192.0.2.7"),
        (("fe80::1%eth0", 25, 0, 2), "fe80::/64"),
    ],
)
def test_an_ipv6_client_is_counted_by_its_64(peer: tuple[object, ...], client: str) -> None:
    """An IPv6 host usually holds a whole /64: counting single addresses would let one
    client open a connection from each of them and never meet its cap."""
    assert client_of(peer) == client
