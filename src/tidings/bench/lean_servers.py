"""The batch provider and the Python SMTP sink `tidings bench send` runs: `tidings
dev-provider`'s app and `tidings dev-smtp`'s server, parsing and answering exactly as they do,
keeping nothing they accept but its addresses, appended one a line to a file before the answer
goes out. The dev servers' own stores keep every recipient (the provider about 1.2 KB each, the
sink each 14 KB message), which at ten million is more memory than the machine has; this way
they stay flat at any campaign size and the bench counts what they accepted, and the
duplicates, in SQL (`bench.provider_checks`).

`python -m tidings.bench.lean_servers provider|smtp PORT ADDRESS_FILE`
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TextIO

from tidings.bootstrap import utcnow
from tidings.delivery.served import Served
from tidings.devservers.dev_server import DevProviderServer
from tidings.devservers.dev_store import AcceptedBatch, AcceptedRecipient, DevStore
from tidings.devservers.sink import ReceivedMessage, SmtpSink


def _append(log: TextIO, addresses: Iterable[str]) -> None:
    # One write an answer, flushed before it: once a client has its answer, the file holds
    # the addresses it was accepted for.
    log.write("".join(f"{address}\n" for address in addresses))
    log.flush()


class AddressLog(DevStore):
    """A dev-provider store that writes accepted addresses to `log` and keeps none: its
    `batches` and `recipients` stay empty, so `/_dev/messages` finds nothing."""

    def __init__(self, log: TextIO) -> None:
        super().__init__(None)
        self._log = log

    async def add(self, batch: AcceptedBatch, recipients: Sequence[AcceptedRecipient]) -> None:
        _append(self._log, (recipient.address for recipient in recipients))


async def serve(kind: str, port: int, path: Path) -> None:
    """Serve `kind` (provider or smtp) on loopback `port` until SIGTERM or SIGINT."""
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    with path.open("a", encoding="utf-8") as log:
        async with _server(kind, port, log):
            await stopping.wait()


def _server(kind: str, port: int, log: TextIO) -> Served:
    if kind == "provider":
        provider = DevProviderServer(port=port)
        provider.store = provider.app.store = AddressLog(log)
        return provider
    sink = SmtpSink(clock=utcnow, port=port)

    def forget(message: ReceivedMessage) -> None:
        _append(log, message.recipients)
        sink.messages.clear()  # the one just accepted: the sink keeps none

    sink.on_message = forget
    return sink


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])))
