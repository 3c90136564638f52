"""One SMTP connection's mail transactions, pipelined where the relay offers it (RFC 2920).

aiosmtplib opens the connection: TCP or TLS, STARTTLS, EHLO and AUTH. Then this session takes
over its transport for the transactions, for two things aiosmtplib does not do: MAIL, every
RCPT and DATA go out in one write when the relay advertises PIPELINING (one round trip before
the content instead of two or more), and the content is handed over as prepared once per
message, CRLF line endings and dot-stuffing done with two byte scans instead of two regular
expression passes over every message at every send. Where PIPELINING is not offered, the same
commands go one at a time. Nothing here classifies or logs: `smtp.py` decides what a reply
means, and reply texts (which echo addresses) never leave it.
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from typing import NamedTuple

from aiosmtplib import SMTP

# A reply line is at most 512 octets (RFC 5321 4.5.3.1.5); a few KB is generous for any reply.
MAX_REPLY_BYTES = 16 * 1024
START_INPUT = 354
_BARE_LINE_ENDING = re.compile(rb"\r\n|\n|\r(?!\n)")
_UNSENDABLE_IN_PATH = re.compile(r"[\x00-\x20\x7f<>]")


class Reply(NamedTuple):
    code: int
    text: str  # may echo addresses: never logged, never put in an exception's message


class SessionLost(Exception):
    """The connection closed (or sent garbage) before the awaited reply arrived."""


class EnvelopeReplies(NamedTuple):
    """What the relay answered before the content: DATA is `None` when it was not sent
    (one at a time, after a refused MAIL or with every RCPT refused)."""

    mail: Reply
    recipients: list[Reply]
    data: Reply | None


def path(address: str, encoding: str) -> bytes:
    """`<address>` for MAIL or RCPT. ValueError for what cannot go on a command line (control
    characters, spaces, angle brackets, or non-ASCII where the relay has no SMTPUTF8)."""
    if not address or _UNSENDABLE_IN_PATH.search(address):
        raise ValueError("the address cannot be sent on an SMTP command line")
    try:
        return b"<" + address.encode(encoding) + b">"
    except UnicodeEncodeError:
        raise ValueError("a non-ASCII address needs SMTPUTF8") from None


def content(message: bytes) -> bytes:
    """The message as DATA carries it: CRLF line endings, a leading dot doubled on every
    line, the terminating `.` line. For the CRLF-only messages tidings builds, where few lines
    start with a dot, it costs three byte counts and a search (about 25 us for 14 KB)."""
    line_ends = message.count(b"\r\n")
    if message.count(b"\n") != line_ends or message.count(b"\r") != line_ends:
        message = _BARE_LINE_ENDING.sub(b"\r\n", message)
    if not message.endswith(b"\r\n"):
        message += b"\r\n"
    if message.find(b"\r\n.") != -1:
        message = message.replace(b"\r\n.", b"\r\n..")
    if message.startswith(b"."):
        message = b"." + message
    return message + b".\r\n"


class _Replies(asyncio.Protocol):
    """Reads replies off the transport into a queue, however many arrive in one segment."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._replies: deque[Reply] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while (reply := self._parse()) is not None:
            self._replies.append(reply)
        if len(self._buffer) > MAX_REPLY_BYTES:
            self.closed = True  # not an SMTP relay talking: nothing more is believed
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _parse(self) -> Reply | None:
        """One complete (possibly multiline) reply from the buffer, or None for not yet."""
        lines: list[bytes] = []
        offset = 0
        while (end := self._buffer.find(b"\n", offset)) != -1:
            line = bytes(self._buffer[offset : end + 1])
            offset = end + 1
            lines.append(line)
            if line[3:4] != b"-":
                del self._buffer[:offset]
                try:
                    code = int(line[:3])
                except ValueError:
                    self.closed = True
                    return None
                text = "\n".join(part[4:].strip().decode("utf-8", "replace") for part in lines)
                return Reply(code, text)
        return None

    async def reply(self) -> Reply:
        while not self._replies:
            if self.closed:
                raise SessionLost("the connection closed before the reply")
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._replies.popleft()


class SmtpSession:
    """A greeted connection, taken over from aiosmtplib for its mail transactions."""

    def __init__(self, greeted: SMTP, *, timeout: float | None) -> None:
        transport = greeted.transport
        if transport is None or not greeted.is_connected:
            raise SessionLost("the connection closed before the session began")
        self._extensions = dict(greeted.esmtp_extensions)
        self.pipelining = "pipelining" in self._extensions
        self._timeout = timeout
        self._replies = _Replies()
        transport.set_protocol(self._replies)
        self._transport: asyncio.WriteTransport = transport  # type: ignore[assignment]

    def supports(self, extension: str) -> bool:
        return extension.lower() in self._extensions

    @property
    def is_connected(self) -> bool:
        return not self._replies.closed and not self._transport.is_closing()

    def close(self) -> None:
        self._replies.closed = True
        self._transport.close()

    def _write(self, data: bytes) -> None:
        if not self.is_connected:
            raise SessionLost("the connection is closed")
        self._transport.write(data)

    async def _reply(self) -> Reply:
        """The next reply; TimeoutError past the session's timeout."""
        async with asyncio.timeout(self._timeout):
            return await self._replies.reply()

    async def command(self, line: bytes) -> Reply:
        self._write(line + b"\r\n")
        return await self._reply()

    async def envelope(self, mail: bytes, recipients: list[bytes]) -> EnvelopeReplies:
        """MAIL, each RCPT and DATA. Pipelined, all go in one write and every reply is read
        (a relay answers a RCPT after a refused MAIL, and DATA after no accepted RCPT, with
        an error). One at a time, it stops at a refused MAIL and sends DATA only once a
        RCPT was accepted."""
        if self.pipelining:
            lines = [mail, *recipients, b"DATA"]
            self._write(b"\r\n".join(lines) + b"\r\n")
            replies = [await self._reply() for _ in lines]
            return EnvelopeReplies(replies[0], replies[1:-1], replies[-1])
        mail_reply = await self.command(mail)
        if mail_reply.code // 100 != 2:
            return EnvelopeReplies(mail_reply, [], None)
        recipient_replies = [await self.command(line) for line in recipients]
        if not any(reply.code // 100 == 2 for reply in recipient_replies):
            return EnvelopeReplies(mail_reply, recipient_replies, None)
        return EnvelopeReplies(mail_reply, recipient_replies, await self.command(b"DATA"))

    async def content(self, prepared: bytes) -> Reply:
        """After a 354: the prepared content (`content()`), then the relay's verdict."""
        self._write(prepared)
        return await self._reply()
