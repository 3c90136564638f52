"""A webhook receiver on a loopback port (a real socket), and a fake DNS resolver that sends
every host there: DNS is the world outside, everything else runs for real."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from tidings.bootstrap import utcnow
from tidings.delivery.webhook_client import WebhookClient

CONTENT_LENGTH = re.compile(rb"(?i)content-length:\s*(\d+)")


async def loopback(host: str, port: int) -> list[str]:
    return ["127.0.0.1"]


def loopback_webhook_client() -> WebhookClient:
    """The real webhook client, with private networks allowed and every host on loopback."""
    return WebhookClient(clock=utcnow, allow_private_networks=True, resolver=loopback)


@asynccontextmanager
async def receiver() -> AsyncIterator[int]:
    """Answers 200 to every POST, except under `/fail`, which answers 500 and echoes the
    body back (as careless receivers do: a response must never reach a log). Yields the port."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = CONTENT_LENGTH.search(head)
        body = await reader.readexactly(int(length.group(1)) if length else 0)
        status, echo = (
            (b"500 Error", body) if b" /fail" in head.split(b"\r\n")[0] else (b"200 OK", b"")
        )
        writer.write(
            b"HTTP/1.1 "
            + status
            + b"\r\nContent-Length: "
            + str(len(echo)).encode()
            + b"\r\nConnection: close\r\n\r\n"
            + echo
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]
