"""The batch provider `tidings bench send` posts to: `tidings dev-provider`'s app, parsing,
substituting and answering exactly as it does, with a store that keeps no recipient in memory.
Each accepted address is appended, one a line, to a file before the answer goes out, so the
provider stays flat at any campaign size (the dev provider's own store keeps every recipient,
about 1.3 KB each) and the bench counts what it accepted, and the duplicates, in SQL
(`bench.provider_checks`).

`python -m tidings.bench.provider_process PORT ADDRESS_FILE`
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from tidings.devservers.dev_server import DevProviderServer
from tidings.devservers.dev_store import AcceptedBatch, AcceptedRecipient, DevStore


class AddressLog(DevStore):
    """A dev-provider store that writes accepted addresses to `path` and keeps none: its
    `batches` and `recipients` stay empty, so `/_dev/messages` finds nothing."""

    def __init__(self, path: Path) -> None:
        super().__init__(None)
        self._file = path.open("a", encoding="utf-8")

    async def add(self, batch: AcceptedBatch, recipients: Sequence[AcceptedRecipient]) -> None:
        # One small write a request, flushed before the answer: once a client has its answer,
        # the file holds the addresses it was accepted for.
        self._file.write("".join(f"{recipient.address}\n" for recipient in recipients))
        self._file.flush()

    def close(self) -> None:
        self._file.close()


async def serve(port: int, path: Path) -> None:
    """Serve on loopback `port` until SIGTERM or SIGINT."""
    store = AddressLog(path)
    server = DevProviderServer(port=port)
    server.store = server.app.store = store
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    try:
        await stop.wait()
    finally:
        await server.stop()
        store.close()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), Path(sys.argv[2])))
