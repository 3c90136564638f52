"""`async with` for the servers tidings runs: inbound mail, the SMTP sink, the dev provider."""

from __future__ import annotations

from types import TracebackType
from typing import Self


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
