"""The SMTP (or LMTP) receiver of `tidings inbound` (PRV-6): the MX or the relay delivers
bounces, complaints and unsubscribe mail here. It knows no tables: each accepted message goes
to `deliver(recipients, data)`, whose durable handling comes before the 250 reply.

Recipients `accepts` refuses get 550 at RCPT; a message over `max_bytes` is refused by SIZE
(552); a failure while handling gets 451, so the sending MTA keeps the message and tries
again: nothing is lost and the server never stops on bad mail. It runs in the caller's event
loop, like the dev SMTP sink.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiosmtpd.lmtp import LMTP
from aiosmtpd.smtp import SMTP

from tidings.delivery.served import SmtpServed

log = structlog.get_logger("tidings.inbound")
Deliver = Callable[[list[str], bytes], Awaitable[object]]


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
        server_name: str = "tidings-inbound",
    ) -> None:
        super().__init__()
        self.host = host
        self.port = port
        self.lmtp = lmtp
        self._handler = _Handler(accepts, deliver)
        self._max_bytes = max_bytes
        self._server_name = server_name

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._new_protocol, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    def _new_protocol(self) -> Any:
        protocol = LMTP if self.lmtp else SMTP
        return self._track(
            protocol(
                self._handler,
                hostname=self._server_name,
                ident="tidings inbound",
                data_size_limit=self._max_bytes,
                enable_SMTPUTF8=True,
                loop=asyncio.get_running_loop(),
            )
        )


class _Handler:
    def __init__(self, accepts: Callable[[str], bool], deliver: Deliver) -> None:
        self._accepts = accepts
        self._deliver = deliver

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
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
