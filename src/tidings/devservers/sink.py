"""The SMTP sink (PRV-4, `tidings dev-smtp`): a real aiosmtpd server that keeps what it receives
and injects faults on demand.

Tests, benchmarks and developers point the SMTP provider at it over loopback. Faults are a
frozen `Faults` value read at every command, so a test flips behaviour by assigning
`sink.faults = Faults(...)` while the server runs. Recipient faults are triggered by markers
in the address (`alice+reject550@example.com`), so they also work against a sink running in
another process. The server runs in the caller's event loop (`loop.create_server` with
aiosmtpd's protocol), not in aiosmtpd's thread-based `Controller`, so tests stay single-loop.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

from tidings.delivery.served import SmtpServed
from tidings.domain.clock import Clock

DEFAULT_RCPT_REPLIES: Mapping[str, str] = {
    "+reject550": "550 5.1.1 Mailbox unavailable (injected by the sink)",
    "+defer451": "451 4.2.0 Mailbox busy, try again later (injected by the sink)",
}


@dataclass(frozen=True, slots=True)
class Faults:
    """What the sink does wrong. Replace the whole value to change it while running.

    rcpt_replies: a marker found in a recipient's local part -> the RCPT reply it gets
        (an empty marker matches every recipient).
    mail_reply / data_reply: replace the reply to every MAIL / DATA (a non-2xx reply means
        the message is not stored).
    disconnect_during_data: drop the connection once the message body has arrived, before
        replying, leaving the client unsure whether it was accepted; nothing is stored.
    delay_seconds: sleep before replying to each command named in `delay_commands`.
    fail_every_nth: refuse every nth DATA the sink has seen with `nth_reply` (0 = never).
    rcpt_limit_per_connection: after this many accepted recipients on one connection, refuse
        every further RCPT on it with `452 4.5.3` (0 = no limit), as relays that cap a
        session do.
    """

    rcpt_replies: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_RCPT_REPLIES))
    mail_reply: str | None = None
    data_reply: str | None = None
    disconnect_during_data: bool = False
    delay_seconds: float = 0.0
    delay_commands: frozenset[str] = frozenset({"MAIL", "RCPT", "DATA"})
    fail_every_nth: int = 0
    nth_reply: str = "451 4.3.0 Temporary failure (injected by the sink)"
    rcpt_limit_per_connection: int = 0

    def rcpt_reply(self, address: str) -> str | None:
        local_part = address.rpartition("@")[0] or address
        for marker, reply in self.rcpt_replies.items():
            if marker in local_part:
                return reply
        return None


@dataclass(frozen=True, slots=True)
class ReceivedMessage:
    """One accepted message exactly as it arrived: `data` is the raw bytes after DATA."""

    mail_from: str
    recipients: tuple[str, ...]
    data: bytes
    received_at: datetime
    queue_id: str


class SmtpSink(SmtpServed):
    """An SMTP server on `host:port` that stores messages and injects `faults`.

    Port 0 picks a free port; `port` then holds the bound one and a restart reuses it.
    With `store_dir`, each accepted message is also written there as `<time>-<n>.eml`.
    With `credentials`, MAIL is refused until the client authenticates with them.
    `tls_context` enables STARTTLS, or TLS from the first byte with `implicit_tls=True`.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: Faults | None = None,
        store_dir: Path | None = None,
        credentials: tuple[str, str] | None = None,
        tls_context: ssl.SSLContext | None = None,
        implicit_tls: bool = False,
        server_name: str = "tidings-sink",
        on_message: Callable[[ReceivedMessage], None] | None = None,
        pipelining: bool = True,
    ) -> None:
        super().__init__()
        self._clock = clock
        self.on_message = on_message  # told of each accepted message, after it is stored
        self.pipelining = pipelining  # offered in EHLO (RFC 2920)
        self.host = host
        self.port = port
        self.faults = faults or Faults()
        self.store_dir = store_dir
        self.messages: list[ReceivedMessage] = []
        self.connections_accepted = 0
        self.data_commands = 0
        self._credentials = credentials
        self._tls_context = tls_context
        self._implicit_tls = implicit_tls
        self._server_name = server_name
        self._arrived = asyncio.Condition()
        self._sequence = itertools.count(1)
        self._handler = _Handler(self)

    async def start(self) -> None:
        if self._server is not None:
            return
        if self.store_dir is not None:
            await asyncio.to_thread(self.store_dir.mkdir, parents=True, exist_ok=True)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._new_protocol,
            self.host,
            self.port,
            ssl=self._tls_context if self._implicit_tls else None,
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def serve_forever(self) -> None:
        await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def wait_for(self, count: int, timeout_seconds: float = 5.0) -> list[ReceivedMessage]:
        """Wait until at least `count` messages have arrived; TimeoutError if they do not."""
        try:
            async with asyncio.timeout(timeout_seconds), self._arrived:
                await self._arrived.wait_for(lambda: len(self.messages) >= count)
        except TimeoutError:
            raise TimeoutError(
                f"{len(self.messages)} of {count} messages arrived within {timeout_seconds} s"
            ) from None
        return list(self.messages)

    def clear(self) -> None:
        self.messages.clear()
        self.connections_accepted = 0
        self.data_commands = 0

    def _new_protocol(self) -> Any:
        self.connections_accepted += 1
        protocol = SMTP(
            self._handler,
            hostname=self._server_name,
            ident="tidings dev-smtp",
            enable_SMTPUTF8=True,
            tls_context=None if self._implicit_tls else self._tls_context,
            # AUTH is offered without TLS so loopback tests can use it; MAIL enforces it
            # (aiosmtpd's own auth_required would warn about plain-text AUTH).
            auth_require_tls=False,
            authenticator=self._authenticate if self._credentials else None,
            loop=asyncio.get_running_loop(),
        )
        return self._track(protocol)

    def _authenticate(
        self, server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any
    ) -> AuthResult:
        # handled=False makes aiosmtpd send its own 535 when the credentials do not match.
        if self._credentials is None or not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        expected = tuple(part.encode() for part in self._credentials)
        supplied = (bytes(auth_data.login), bytes(auth_data.password))
        return AuthResult(success=supplied == expected, handled=False)

    async def _delay(self, command: str) -> None:
        faults = self.faults
        if faults.delay_seconds > 0 and command in faults.delay_commands:
            await asyncio.sleep(faults.delay_seconds)

    async def _record(self, envelope: Any) -> str:
        sequence = next(self._sequence)
        message = ReceivedMessage(
            mail_from=envelope.mail_from,
            recipients=tuple(envelope.rcpt_tos),
            data=bytes(envelope.original_content),
            received_at=self._clock(),
            queue_id=f"SINK{sequence:08d}",
        )
        if self.store_dir is not None:
            # Written before the 250, so an accepted message is always on disk.
            name = f"{message.received_at:%Y%m%dT%H%M%S.%fZ}-{sequence:06d}.eml"
            await asyncio.to_thread(_write_atomically, self.store_dir / name, message.data)
        async with self._arrived:
            self.messages.append(message)
            self._arrived.notify_all()
        if self.on_message is not None:
            self.on_message(message)
        return message.queue_id


class _Handler:
    """aiosmtpd hooks: each reads the sink's current faults, so changes apply at once."""

    def __init__(self, sink: SmtpSink) -> None:
        self._sink = sink

    async def handle_EHLO(
        self, server: Any, session: Any, envelope: Any, hostname: str, responses: list[str]
    ) -> list[str]:
        """aiosmtpd reads commands one line at a time, so it handles pipelined commands as
        they come; advertising it lets clients use it (RFC 2920), as real relays do."""
        session.host_name = hostname
        if self._sink.pipelining:
            responses.insert(1, "250-PIPELINING")
        return responses

    async def handle_MAIL(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        await self._sink._delay("MAIL")
        if self._sink._credentials is not None and not session.authenticated:
            return "530 5.7.0 Authentication required"
        reply = self._sink.faults.mail_reply
        if reply is not None and not reply.startswith("2"):
            return reply
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return reply or "250 2.1.0 OK"

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        await self._sink._delay("RCPT")
        faults = self._sink.faults
        accepted_here = getattr(session, "tidings_rcpt_count", 0)
        if 0 < faults.rcpt_limit_per_connection <= accepted_here:
            return "452 4.5.3 Too many recipients on this connection (injected by the sink)"
        reply = faults.rcpt_reply(address)
        if reply is not None and not reply.startswith("2"):
            return reply
        session.tidings_rcpt_count = accepted_here + 1
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(options)
        return reply or "250 2.1.5 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        sink = self._sink
        await sink._delay("DATA")
        faults = sink.faults
        sink.data_commands += 1
        if faults.disconnect_during_data:
            server.transport.close()
            # Closing cancels this session's task; wait for that rather than reply.
            await asyncio.Event().wait()
        if faults.fail_every_nth > 0 and sink.data_commands % faults.fail_every_nth == 0:
            return faults.nth_reply
        reply = faults.data_reply
        if reply is not None and not reply.startswith("2"):
            return reply
        queue_id = await sink._record(envelope)
        return reply or f"250 2.0.0 OK: queued as {queue_id}"


def _write_atomically(path: Path, data: bytes) -> None:
    """Write to a hidden temporary name, then rename, so a watcher never sees half a file."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)
