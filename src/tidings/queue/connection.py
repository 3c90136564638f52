"""Where a worker's claim rounds run. On PostgreSQL a round (the outcome write and the claim)
is one statement, atomic by itself, so the rounds share one connection kept open in
autocommit mode: no pool checkout, ping, BEGIN or COMMIT per round. On SQLite each round is
one `BEGIN IMMEDIATE` write transaction, as every write is."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.database import Database


class RoundConnection:
    """The connection (PostgreSQL) or transaction (SQLite) of each claim round."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._held: AsyncConnection | None = None

    @asynccontextmanager
    async def round(self) -> AsyncIterator[AsyncConnection]:
        """A connection for one round; on SQLite its transaction commits on exit."""
        if not self._db.is_postgresql:
            async with self._db.write() as conn:
                yield conn
            return
        if self._held is None:
            connection = await self._db.engine.connect()
            self._held = await connection.execution_options(isolation_level="AUTOCOMMIT")
        try:
            yield self._held
        except BaseException:
            # The connection may be broken: drop it, and the next round opens another.
            with contextlib.suppress(Exception):
                await self.close()
            raise

    async def close(self) -> None:
        if self._held is not None:
            held, self._held = self._held, None
            await held.close()
