"""Named queries for the suppression list, keyed by a keyed hash of the address (AUD-8)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage import feedback
from tidings.storage.dialect import insert_for
from tidings.storage.tables import subscribers, suppression_log, suppressions


@dataclass(frozen=True, slots=True)
class SuppressionRow:
    email_hash: str
    reason: str
    note: str | None
    created_by: str
    created_at: datetime


async def is_suppressed(conn: AsyncConnection, email_hash: str) -> bool:
    query = select(suppressions.c.email_hash).where(suppressions.c.email_hash == email_hash)
    return (await conn.execute(query)).first() is not None


async def reason_of(conn: AsyncConnection, email_hash: str) -> str | None:
    """The reason the address is suppressed for, or None when it is not."""
    query = select(suppressions.c.reason).where(suppressions.c.email_hash == email_hash)
    return (await conn.execute(query)).scalar()


async def change_reason(
    conn: AsyncConnection, email_hash: str, *, reason: str, actor: str, now: datetime
) -> bool:
    """Replace the reason of an existing suppression (the bounce policy upgrading its own
    weaker reason); logged as a suppression for the new reason."""
    result = await conn.execute(
        update(suppressions)
        .where(suppressions.c.email_hash == email_hash, suppressions.c.reason != reason)
        .values(reason=reason, created_by=actor)
    )
    if result.rowcount != 1:
        return False
    await _log(conn, email_hash, "suppress", reason, None, actor, now)
    return True


async def suppress(
    conn: AsyncConnection,
    email_hash: str,
    *,
    reason: str,
    note: str | None,
    actor: str,
    now: datetime,
) -> bool:
    """Add to the list (a no-op if already there); the action is logged either way.
    Returns True when the address was newly suppressed."""
    result = await conn.execute(
        insert_for(conn, suppressions)
        .values(email_hash=email_hash, reason=reason, note=note, created_by=actor, created_at=now)
        .on_conflict_do_nothing(index_elements=["email_hash"])
        .returning(suppressions.c.email_hash)
    )
    created = result.first() is not None
    if created:
        await _log(conn, email_hash, "suppress", reason, note, actor, now)
    return created


async def lift(
    conn: AsyncConnection,
    email_hash: str,
    *,
    note: str | None,
    actor: str,
    now: datetime,
    only_reason: str | None = None,
) -> bool:
    """Remove the suppression (only one for `only_reason`, when given); logged."""
    condition = suppressions.c.email_hash == email_hash
    if only_reason is not None:
        condition = condition & (suppressions.c.reason == only_reason)
    result = await conn.execute(delete(suppressions).where(condition))
    if result.rowcount != 1:
        return False
    await _log(conn, email_hash, "lift", only_reason or "admin", note, actor, now)
    return True


async def _log(
    conn: AsyncConnection,
    email_hash: str,
    action: str,
    reason: str,
    note: str | None,
    actor: str,
    now: datetime,
) -> None:
    await conn.execute(
        insert(suppression_log).values(
            email_hash=email_hash,
            action=action,
            reason=reason,
            note=note,
            actor=actor,
            created_at=now,
        )
    )


async def list_suppressions(
    conn: AsyncConnection, *, after_hash: str | None, limit: int
) -> list[SuppressionRow]:
    query = select(suppressions).order_by(suppressions.c.email_hash).limit(limit)
    if after_hash is not None:
        query = query.where(suppressions.c.email_hash > after_hash)
    return [SuppressionRow(**dict(row._mapping)) for row in await conn.execute(query)]


async def history(conn: AsyncConnection, email_hash: str) -> list[dict[str, Any]]:
    query = (
        select(suppression_log)
        .where(suppression_log.c.email_hash == email_hash)
        .order_by(suppression_log.c.id)
    )
    return [dict(row._mapping) for row in await conn.execute(query)]


REKEY_PAGE = 5000


async def rekey_email_hashes(conn: AsyncConnection, rekey: Callable[[str], str]) -> int:
    """Replace every stored address hash `h` (subscribers, suppressions and their log) with
    `rekey(h)`, in the caller's transaction, a page at a time. Returns rows changed."""
    changed = 0
    for table, key_column in (
        (subscribers, subscribers.c.id),
        (suppression_log, suppression_log.c.id),
        (suppressions, suppressions.c.email_hash),
        *feedback.hashed_tables(),
    ):
        hashed = select(key_column, table.c.email_hash).where(table.c.email_hash.is_not(None))
        keys = list((await conn.execute(hashed)).all())
        for start in range(0, len(keys), REKEY_PAGE):
            page = keys[start : start + REKEY_PAGE]
            await conn.execute(
                update(table)
                .where(key_column == bindparam("row_key"))
                .values(email_hash=bindparam("new_hash")),
                [{"row_key": key, "new_hash": rekey(old)} for key, old in page],
            )
            changed += len(page)
    return changed
