"""A person's traces outside the audience tables (AUD-10): mail to them in the queue and in
the local capture, mail about them queued as ids, and webhook payloads that carry their data.
Read for the privacy export, erased by the privacy delete."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, delete, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.dialect import json_array_elements
from tidings.storage.tables import captured_messages, jobs, webhook_deliveries

REDACTED = {"redacted": True}
SEND_EMAIL = "send_email"
SEND_SUBSCRIBER_EMAIL = "send_subscriber_email"
DELIVER_WEBHOOK = "deliver_webhook"
REQUEST_CONSENT = "request_consent"


def _mail_to(email_key: str) -> ColumnElement[bool]:
    """A `send_email` job addressed to the person (any spelling of the address)."""
    return (jobs.c.kind == SEND_EMAIL) & (func.lower(jobs.c.payload["to"].as_string()) == email_key)


def _jobs_about(subscriber_id: int) -> ColumnElement[bool]:
    """Jobs queued as ids about the person: subscriber mail (the confirmation email) and
    subscribe requests. Ids only, but SQLite reuses ids: left queued, they would act on
    whoever gets the id next."""
    about: ColumnElement[bool] = jobs.c.payload["subscriber_id"].as_integer() == subscriber_id
    return jobs.c.kind.in_([SEND_SUBSCRIBER_EMAIL, REQUEST_CONSENT]) & about


def _about(subscriber_id: int) -> ColumnElement[bool]:
    """A webhook delivery whose event names the person."""
    about: ColumnElement[bool] = (
        webhook_deliveries.c.payload["data"]["subscriber_id"].as_integer() == subscriber_id
    )
    return about


def _captured_for(conn: AsyncConnection, email_key: str) -> ColumnElement[bool]:
    """A captured message with the person among its recipients. The one dialect branch:
    each spells "an element of this JSON array" its own way."""
    elements = json_array_elements(conn)(captured_messages.c.recipients).table_valued("value")
    return exists(select(1).select_from(elements).where(func.lower(elements.c.value) == email_key))


async def traces_of(
    conn: AsyncConnection, *, subscriber_id: int, email_key: str
) -> dict[str, list[dict[str, Any]]]:
    """Queued and captured mail and webhook deliveries about the person, for the export."""
    queued = await conn.execute(
        select(jobs.c.id, jobs.c.kind, jobs.c.status, jobs.c.payload, jobs.c.created_at)
        .where(_mail_to(email_key) | _jobs_about(subscriber_id))
        .order_by(jobs.c.id)
    )
    captured = await conn.execute(
        select(captured_messages)
        .where(_captured_for(conn, email_key))
        .order_by(captured_messages.c.id)
    )
    deliveries = await conn.execute(
        select(
            webhook_deliveries.c.id,
            webhook_deliveries.c.endpoint_id,
            webhook_deliveries.c.event_id,
            webhook_deliveries.c.event_type,
            webhook_deliveries.c.status,
            webhook_deliveries.c.payload,
            webhook_deliveries.c.created_at,
            webhook_deliveries.c.delivered_at,
        )
        .where(_about(subscriber_id))
        .order_by(webhook_deliveries.c.id)
    )
    return {
        "jobs": [dict(row._mapping) for row in queued],
        "captured": [dict(row._mapping) for row in captured],
        "webhook_deliveries": [dict(row._mapping) for row in deliveries],
    }


async def erase_traces(conn: AsyncConnection, *, subscriber_id: int, email_key: str) -> int:
    """Drop mail jobs to and about the person and their captured mail; drop unsent webhook
    deliveries about them and redact the payloads of the rest. A mail job a worker holds
    right now keeps its row (the claim owns it) but loses its payload. Returns rows touched."""
    touched = 0
    mail = _mail_to(email_key) | _jobs_about(subscriber_id)
    result = await conn.execute(delete(jobs).where(mail, jobs.c.status != "running"))
    touched += result.rowcount
    result = await conn.execute(update(jobs).where(mail).values(payload=REDACTED))
    touched += result.rowcount
    result = await conn.execute(delete(captured_messages).where(_captured_for(conn, email_key)))
    touched += result.rowcount
    pending = list(
        (
            await conn.execute(
                select(webhook_deliveries.c.id).where(
                    _about(subscriber_id), webhook_deliveries.c.status == "pending"
                )
            )
        ).scalars()
    )
    if pending:
        await conn.execute(
            delete(jobs).where(
                jobs.c.kind == DELIVER_WEBHOOK,
                jobs.c.payload["delivery_id"].as_integer().in_(pending),
                jobs.c.status != "running",
            )
        )
        result = await conn.execute(
            delete(webhook_deliveries).where(webhook_deliveries.c.id.in_(pending))
        )
        touched += result.rowcount
    result = await conn.execute(
        update(webhook_deliveries)
        .where(_about(subscriber_id))
        .values(payload={"type": "redacted", "data": REDACTED}, response_excerpt=None)
    )
    return touched + int(result.rowcount)
