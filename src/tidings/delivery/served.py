"""`async with` for the servers tidings runs: inbound mail, the SMTP sink, the dev provider."""

from __future__ import annotations

import asyncio
import weakref
from types import TracebackType
from typing import Any, Self


class Served:
    """`async with server:` starts it and stops it however the block ends."""

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()


class SmtpServed(Served):
    """An aiosmtpd server in the caller's event loop that knows its client connections, so
    stopping it closes them too: `asyncio.Server.close` only stops listening (Python 3.11),
    and a connection left open outlives its loop."""

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        # aiosmtpd is untyped; its protocol objects stay behind this one weak set.
        self._protocols: weakref.WeakSet[Any] = weakref.WeakSet()

    def _track(self, protocol: Any) -> Any:
        self._protocols.add(protocol)
        return protocol

    async def stop(self) -> None:
        """Stop listening, close every client connection and wait for their sessions."""
        if self._server is None:
            return
        server, self._server = self._server, None
        server.close()
        self.drop_connections()
        sessions = [
            protocol._handler_coroutine
            for protocol in list(self._protocols)
            if protocol._handler_coroutine is not None
        ]
        await asyncio.gather(*sessions, return_exceptions=True)
        await server.wait_closed()

    def drop_connections(self) -> int:
        """Close every client connection now, as a relay's idle timeout would; returns how many.

        Synchronous on purpose: a client sending right after this has not yet noticed.
        """
        dropped = 0
        for protocol in list(self._protocols):
            if protocol.transport is not None and not protocol.transport.is_closing():
                protocol.transport.close()
                dropped += 1
        return dropped

    @property
    def open_connections(self) -> int:
        """Client connections neither side has closed yet."""
        return sum(
            1
            for protocol in list(self._protocols)
            if protocol.transport is not None and not protocol.transport.is_closing()
        )
