"""Erasing a person's traces outside the audience tables (AUD-10): queued mail to them and
webhook payloads that carry their data."""

from __future__ import annotations

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.events import webhook_delivery_key
from tidings.storage.tables import jobs, webhook_deliveries

REDACTED = {"redacted": True}


async def erase_queued_traces(conn: AsyncConnection, *, subscriber_id: int, email: str) -> int:
    """Drop unsent email jobs addressed to `email` and unsent webhook deliveries about the
    subscriber; redact the payloads of delivered ones. Returns rows touched."""
    touched = 0
    unsent_mail = delete(jobs).where(
        jobs.c.kind == "send_email",
        jobs.c.status.in_(["pending", "dead"]),
        jobs.c.payload["to"].as_string() == email,
    )
    touched += (await conn.execute(unsent_mail)).rowcount
    about_them = webhook_deliveries.c.payload["data"]["subscriber_id"].as_integer() == subscriber_id
    pending_rows = (
        await conn.execute(
            select(
                webhook_deliveries.c.id,
                webhook_deliveries.c.event_id,
                webhook_deliveries.c.endpoint_id,
            ).where(about_them, webhook_deliveries.c.status == "pending")
        )
    ).all()
    pending = [row.id for row in pending_rows]
    if pending:
        keys = [webhook_delivery_key(row.event_id, row.endpoint_id) for row in pending_rows]
        await conn.execute(
            delete(jobs).where(jobs.c.idempotency_key.in_(keys), jobs.c.status != "running")
        )
        result = await conn.execute(
            delete(webhook_deliveries).where(webhook_deliveries.c.id.in_(pending))
        )
        touched += result.rowcount
    result = await conn.execute(
        update(webhook_deliveries)
        .where(about_them)
        .values(payload={"type": "redacted", "data": REDACTED}, response_excerpt=None)
    )
    return touched + int(result.rowcount)
