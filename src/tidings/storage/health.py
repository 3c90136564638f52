"""Readiness: the database answers and is migrated to the latest revision."""

from __future__ import annotations

from sqlalchemy import select

from tidings.domain.errors import NotReady
from tidings.storage import revision
from tidings.storage.database import Database
from tidings.storage.errors import unreachable_as_not_ready


async def check_ready(db: Database) -> None:
    """Return when the database answers and is at head; raise `NotReady` saying which not."""
    with unreachable_as_not_ready():
        async with db.read() as conn:
            await conn.execute(select(1))
        at_head = await revision.is_at_head(db)
    if not at_head:
        raise NotReady("the database is not migrated to the latest revision: run `tidings migrate`")
