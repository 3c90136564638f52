"""The SMTP (or LMTP) receiver of `tidings inbound` (PRV-6): the MX or the relay delivers
bounces, complaints and unsubscribe mail here. It knows no tables: each accepted message goes
to `deliver(recipients, data)`, whose durable handling comes before the 250 reply.

Recipients `accepts` refuses get 550 at RCPT, those past `max_recipients` 452 (RFC 5321
4.5.3.1.10: the client sends them again in another transaction); a message over `max_bytes`
is refused by SIZE (552); a failure while handling gets 451, so the sending MTA keeps the
message and tries again: nothing is lost and the server never stops on bad mail. The MX takes
mail from anyone, so what one client can cost is bounded (`SessionLimits`). It runs in the
caller's event loop, like the dev SMTP sink.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
from aiosmtpd.lmtp import LMTP
from aiosmtpd.smtp import SMTP

from tidings.delivery.served import SmtpServed

log = structlog.get_logger("tidings.inbound")
Deliver = Callable[[list[str], bytes], Awaitable[object]]
# Commands that move no mail: a client repeating them only costs replies (no AUTH is ever
# accepted here, so each try is noise).
_CHATTER_CALLS = {
    "NOOP": 20,
    **dict.fromkeys(("HELP", "VRFY", "EXPN", "HELO", "EHLO", "LHLO", "AUTH"), 5),
}
# MAIL, RCPT, DATA, RSET: many per connection when a relay reuses it for its whole queue.
_TRANSACTION_CALLS = 100_000
# No mail line is longer than 1,000 octets (RFC 5321 4.5.3.1.6); aiosmtpd refuses a longer
# one only once it ends, keeping its pieces meanwhile, so an endless line is cut off here.
MAX_UNTERMINATED_BYTES = 65_536


@dataclass(frozen=True)
class SessionLimits:
    """What one client may cost the receiver; past each, it is told to come back later."""

    max_recipients: int = 100  # RFC 5321 4.5.3.1.8: at least 100 must be taken
    max_connections: int = 100
    max_connections_per_client: int = 20
    idle_timeout_seconds: float = 60.0
    session_timeout_seconds: float = 600.0


class InboundServer(SmtpServed):
    def __init__(
        self,
        *,
        accepts: Callable[[str], bool],
        deliver: Deliver,
        host: str = "127.0.0.1",
        port: int = 0,
        lmtp: bool = False,
        max_bytes: int = 262_144,
        limits: SessionLimits = SessionLimits(),
        tls_context: ssl.SSLContext | None = None,
        server_name: str = "tidings-inbound",
    ) -> None:
        super().__init__()
        self.host = host
        self.port = port
        self.lmtp = lmtp
        self._handler = _Handler(accepts, deliver, limits.max_recipients)
        self._max_bytes = max_bytes
        self._limits = limits
        self._tls_context = tls_context
        self._server_name = server_name
        self._gate = _Gate(limits)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._new_protocol, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    def _new_protocol(self) -> Any:
        protocol = _LimitedLMTP if self.lmtp else _LimitedSMTP
        return self._track(
            protocol(
                self._handler,
                gate=self._gate,
                session_timeout_seconds=self._limits.session_timeout_seconds,
                hostname=self._server_name,
                ident="tidings inbound",
                data_size_limit=self._max_bytes,
                enable_SMTPUTF8=True,
                tls_context=self._tls_context,
                timeout=self._limits.idle_timeout_seconds,
                command_call_limit={**_CHATTER_CALLS, "*": _TRANSACTION_CALLS},
                loop=asyncio.get_running_loop(),
            )
        )


def client_of(peer: object) -> str:
    """Who a connection counts against: its IPv4 address, or its IPv6 /64 (one host is
    usually given a whole /64, so its single addresses are free to pick)."""
    host = str(peer[0]) if isinstance(peer, tuple) else str(peer)
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:  # a dual-stack socket's IPv4 client
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


class _Gate:
    """Counts open connections, in all and by client (`client_of`)."""

    def __init__(self, limits: SessionLimits) -> None:
        self._limits = limits
        self._by_client: Counter[str] = Counter()

    def admit(self, client: str) -> bool:
        if (
            self._by_client.total() >= self._limits.max_connections
            or self._by_client[client] >= self._limits.max_connections_per_client
        ):
            return False
        self._by_client[client] += 1
        return True

    def release(self, client: str) -> None:
        self._by_client[client] -= 1
        if self._by_client[client] <= 0:
            del self._by_client[client]


class _LimitedSMTP(SMTP):
    """aiosmtpd's session with what it lacks: the connection caps, checked when a client
    connects (421 and closed past them), a whole-session deadline, and an end to endless
    lines. Its idle timeout, size limit and command call limits do the rest."""

    def __init__(
        self, handler: Any, *, gate: _Gate, session_timeout_seconds: float, **options: Any
    ) -> None:
        super().__init__(handler, **options)
        self._gate = gate
        self._session_timeout_seconds = session_timeout_seconds
        self._client: str | None = None  # set while this connection is counted
        self._deadline: asyncio.TimerHandle | None = None
        self._unterminated = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self.session is not None:  # STARTTLS: the same connection, now over TLS
            super().connection_made(transport)
            return
        client = client_of(transport.get_extra_info("peername"))
        if not self._gate.admit(client):
            log.info("inbound.connection_refused")
            assert isinstance(transport, asyncio.WriteTransport)
            transport.write(b"421 4.7.0 Too many connections, try again later\r\n")
            transport.close()
            return
        self._client = client
        self._deadline = self.loop.call_later(self._session_timeout_seconds, self._expire)
        super().connection_made(transport)

    def connection_lost(self, error: Exception | None) -> None:
        if self._client is None:  # refused: aiosmtpd never saw it
            return
        self._gate.release(self._client)
        self._client = None
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_lost(error)

    def data_received(self, data: bytes) -> None:
        end = data.rfind(b"\n")
        self._unterminated = self._unterminated + len(data) if end < 0 else len(data) - end - 1
        if self._unterminated > MAX_UNTERMINATED_BYTES:
            self._close_with(b"500 5.5.2 Line too long, closing\r\n")
            return
        super().data_received(data)

    def _expire(self) -> None:
        self._close_with(b"421 4.4.2 Session too long, closing\r\n")

    def _close_with(self, reply: bytes) -> None:
        transport = self.transport
        if isinstance(transport, asyncio.WriteTransport) and not transport.is_closing():
            transport.write(reply)
            transport.close()


class _LimitedLMTP(_LimitedSMTP, LMTP):
    pass


class _Handler:
    def __init__(
        self, accepts: Callable[[str], bool], deliver: Deliver, max_recipients: int
    ) -> None:
        self._accepts = accepts
        self._deliver = deliver
        self._max_recipients = max_recipients

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        if len(envelope.rcpt_tos) >= self._max_recipients:
            return "452 4.5.3 Too many recipients"
        if not self._accepts(address):
            return "550 5.1.1 No such mailbox here"
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(options)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        recipients = list(envelope.rcpt_tos)
        try:
            await self._deliver(recipients, bytes(envelope.original_content))
        except Exception as exc:  # bad mail or a busy database: the sender keeps it, retries
            log.error("inbound.failed", error_type=type(exc).__name__)
            reply = "451 4.3.0 Could not store the message, try again later"
        else:
            reply = "250 2.0.0 OK"
        # LMTP answers DATA once per recipient (RFC 2033).
        return "\r\n".join([reply] * len(recipients)) if isinstance(server, LMTP) else reply
