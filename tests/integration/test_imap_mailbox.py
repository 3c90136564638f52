"""The IMAP client of `tidings inbound --imap` (IBM-2): it hangs up itself once done, instead
of leaving the close to the server, which can come after a `--once` run's event loop is gone
(the socket then outlives the loop)."""

from __future__ import annotations

import asyncio
import contextlib

from tidings.delivery.imap_mailbox import MailboxAccount, open_mailbox

WAIT = 5.0


async def test_the_client_closes_its_connection_when_the_server_does_not() -> None:
    """A server that answers LOGIN, SELECT and LOGOUT but never closes: once the mailbox is
    done with, the server reads the end of the connection."""
    ended = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"* OK IMAP4rev1 ready\r\n")
        while line := await reader.readline():
            tag, command = line.strip().split(b" ", 2)[:2]
            if command.upper() == b"CAPABILITY":
                writer.write(b"* CAPABILITY IMAP4rev1\r\n")
            if command.upper() == b"SELECT":
                writer.write(b"* 0 EXISTS\r\n")
            if command.upper() == b"LOGOUT":
                writer.write(b"* BYE logging out\r\n")
            writer.write(tag + b" OK " + command + b" completed\r\n")
            await writer.drain()
        ended.set()  # the client hung up (the loop above reads until EOF)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    account = MailboxAccount("127.0.0.1", port, False, "bounces", "secret", timeout_seconds=WAIT)
    try:
        async with open_mailbox(account):
            assert not ended.is_set()
        with contextlib.suppress(TimeoutError):  # the assertion below says what was missed
            await asyncio.wait_for(ended.wait(), WAIT)
    finally:
        server.close()
        await server.wait_closed()
    assert ended.is_set()
