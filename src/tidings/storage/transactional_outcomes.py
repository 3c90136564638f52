"""Named queries for transactional mail's outcomes (PRV-6): which mail job a Message-ID
belongs to, and what the provider or the mailbox reported about it.

A message is known by its Message-ID's local part: for mail tidings numbers itself, a digest
of the job's idempotency key (so it is known before the message is rendered, and the same on
every retry); for a caller's own Message-ID, its local part.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.bulk import among
from tidings.storage.dialect import insert_for
from tidings.storage.sending.recipient_outcomes import outcome_values
from tidings.storage.tables import jobs, subscribers, transactional_messages

# A transactional message is never "unsubscribed through" (no list link in it).
KINDS = frozenset({"delivered", "soft_bounce", "hard_bounce", "complaint"})


@dataclass(frozen=True, slots=True)
class MessageOutcome:
    message_key: str
    delivered_at: datetime | None
    bounced_at: datetime | None
    bounce_kind: str | None
    bounce_code: str | None
    complained_at: datetime | None


def key_of_job(idempotency_key: str) -> str:
    """The local part of the Message-ID of a mail job that does not bring its own."""
    return hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]


def key_of(message_id: str) -> str:
    """A Message-ID's local part (`<local@domain>`, or bare as providers report it)."""
    bare = message_id.strip().removeprefix("<").removesuffix(">")
    return bare.rpartition("@")[0][:255] if "@" in bare else bare[:255]


async def remember(
    conn: AsyncConnection,
    *,
    job_id: int,
    idempotency_key: str,
    message_id: str | None,
    now: datetime,
) -> None:
    """Note which message mail job `job_id` sends: its own `message_id`, or the one tidings
    gives it from the job's idempotency key (a repeat is left as it was)."""
    message_key = key_of(message_id) if message_id else key_of_job(idempotency_key)
    await conn.execute(
        insert_for(conn, transactional_messages)
        .values(job_id=job_id, message_key=message_key, created_at=now)
        .on_conflict_do_nothing()
    )


async def addressee(conn: AsyncConnection, job_id: int) -> tuple[str, str | None] | None:
    """The message key of mail job `job_id` and the address it went to (`to` in its payload,
    or its subscriber's address); None when the job sent no message we know of."""
    query = (
        select(transactional_messages.c.message_key, jobs.c.payload)
        .join(jobs, jobs.c.id == transactional_messages.c.job_id)
        .where(transactional_messages.c.job_id == job_id)
    )
    row = (await conn.execute(query)).first()
    if row is None:
        return None
    payload = row.payload or {}
    address = payload.get("to")
    if not isinstance(address, str) and isinstance(payload.get("subscriber_id"), int):
        found = select(subscribers.c.email).where(subscribers.c.id == payload["subscriber_id"])
        address = (await conn.execute(found)).scalar()
    return row.message_key, address if isinstance(address, str) else None


async def known(conn: AsyncConnection, message_ids: Iterable[str]) -> set[str]:
    """The local parts of these Message-IDs that are transactional messages."""
    wanted = list({key_of(message_id) for message_id in message_ids})
    if not wanted:
        return set()
    column = transactional_messages.c.message_key
    return set((await conn.execute(select(column).where(among(conn, column, wanted)))).scalars())


async def record_outcome(
    conn: AsyncConnection, message_id: str, *, kind: str, at: datetime, code: str | None
) -> bool:
    """Fold one reported event into the message's row; False when it is no transactional
    message of ours (or the kind is nothing a message records)."""
    if kind not in KINDS:
        return False
    row = transactional_messages.c
    values = outcome_values(row, kind=kind, at=at, code=code)
    result = await conn.execute(
        update(transactional_messages).where(row.message_key == key_of(message_id)).values(**values)
    )
    return bool(result.rowcount)


async def outcome_of_job(conn: AsyncConnection, job_id: int) -> MessageOutcome | None:
    return await _one(conn, transactional_messages.c.job_id == job_id)


async def outcome_of_message(conn: AsyncConnection, message_id: str) -> MessageOutcome | None:
    return await _one(conn, transactional_messages.c.message_key == key_of(message_id))


async def _one(conn: AsyncConnection, condition: ColumnElement[bool]) -> MessageOutcome | None:
    row = transactional_messages.c
    query = select(
        row.message_key, row.delivered_at, row.bounced_at, row.bounce_kind, row.bounce_code,
        row.complained_at,
    ).where(condition)  # fmt: skip
    found = (await conn.execute(query)).first()
    return None if found is None else MessageOutcome(**found._mapping)
