"""The least database work a batch send can do, in bare psycopg: `tidings bench send`'s floor.

Per batch, two statements, each its own transaction: one marks the batch's recipient rows in
flight and returns the recipients they name (the rows a request is built from), one marks them
sent. No claim token, no consent re-check, no counts, no queue: what is left when every
guarantee is taken away, so the distance from it to a worker is what the guarantees cost and
the distance from it to a client with no database is what touching the rows at all costs.
PostgreSQL only (an UPDATE inside WITH … RETURNING); it runs on the rows a finished bench send
left behind, in the bench's scratch database.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

import psycopg

from tidings.domain.sending import RecipientState

_TAKE = """
WITH moved AS (
    UPDATE campaign_recipients SET state = %(state)s, updated_at = now()
    WHERE batch_id = %(batch)s
    RETURNING id, subscriber_id, position
)
SELECT moved.id, subscribers.id, subscribers.email, subscribers.name,
       subscribers.created_at, subscribers.attributes
FROM moved JOIN subscribers ON subscribers.id = moved.subscriber_id
ORDER BY moved.position
"""

_SETTLE = """
UPDATE campaign_recipients SET state = %(state)s, updated_at = now() WHERE batch_id = %(batch)s
"""


class FloorRecipient(NamedTuple):
    """A recipient row as the floor reads it: what a batch request is built from."""

    recipient_id: int
    subscriber_id: int
    email: str
    name: str | None
    created_at: datetime
    attributes: dict[str, Any] | None


async def batch_ids(conn: psycopg.AsyncConnection[Any]) -> list[int]:
    """Every batch in the scratch database (one campaign's), in order, its recipient table
    vacuumed first: the send left a dead version of each row, and the floor's own changes
    should find the room in their pages that a first send's do (autocommit connection)."""
    await conn.execute("VACUUM campaign_recipients")
    cursor = await conn.execute("SELECT id FROM campaign_batches ORDER BY id")
    return [row[0] for row in await cursor.fetchall()]


async def take(conn: psycopg.AsyncConnection[Any], batch_id: int) -> list[FloorRecipient]:
    """Mark the batch's rows in flight; the recipients they name, in position order."""
    cursor = await conn.execute(
        _TAKE, {"state": RecipientState.SENDING.value, "batch": batch_id}, prepare=True
    )
    return [FloorRecipient._make(row) for row in await cursor.fetchall()]


async def settle(conn: psycopg.AsyncConnection[Any], batch_id: int) -> None:
    """Mark the batch's rows sent."""
    await conn.execute(
        _SETTLE, {"state": RecipientState.SENT.value, "batch": batch_id}, prepare=True
    )
