"""What the benchmarks read from the database around a piece of work: its size, the
write-ahead log and transaction ids it moved (PostgreSQL), and the rows it left."""

from __future__ import annotations

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.dialect import is_postgresql
from tidings.storage.tables import campaign_batches, campaign_recipients, inbound_events


async def database_bytes(conn: AsyncConnection) -> int:
    """The database's size: `pg_database_size` on PostgreSQL; on SQLite the pages in use
    (free pages left by deleted rows are not counted) times the page size."""
    if is_postgresql(conn):
        query = text("SELECT pg_database_size(current_database())")
        return int((await conn.execute(query)).scalar_one())
    pages = (await conn.execute(text("PRAGMA page_count"))).scalar_one()
    free = (await conn.execute(text("PRAGMA freelist_count"))).scalar_one()
    page_size = (await conn.execute(text("PRAGMA page_size"))).scalar_one()
    return (int(pages) - int(free)) * int(page_size)


async def wal_position(conn: AsyncConnection) -> int | None:
    """PostgreSQL's current write-ahead log position in bytes (None on SQLite): the WAL a
    piece of work wrote is the difference of two readings."""
    if not is_postgresql(conn):
        return None
    query = text("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')")
    return int((await conn.execute(query)).scalar_one())


async def next_transaction_id(conn: AsyncConnection) -> int | None:
    """PostgreSQL's next transaction id (None on SQLite), read without taking one: ids go
    only to transactions that write, so two readings count the writing transactions
    committed or rolled back between them (this server's other databases too)."""
    if not is_postgresql(conn):
        return None
    query = text("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
    return int((await conn.execute(query)).scalar_one())


async def batch_count(conn: AsyncConnection, campaign_id: int) -> int:
    query = select(func.count()).where(campaign_batches.c.campaign_id == campaign_id)
    return int((await conn.execute(query)).scalar_one())


async def recipient_states(conn: AsyncConnection, campaign_id: int) -> dict[str, int]:
    """The campaign's recipient rows counted by state, in the database: what a send's
    accounting is checked against at any size."""
    query = (
        select(campaign_recipients.c.state, func.count())
        .where(campaign_recipients.c.campaign_id == campaign_id)
        .group_by(campaign_recipients.c.state)
    )
    return {str(state): int(rows) for state, rows in (await conn.execute(query)).all()}


async def applied_event_count(conn: AsyncConnection, source: str) -> int:
    """Received events from `source` that were applied."""
    query = select(inbound_events.c.id).where(
        inbound_events.c.source == source, inbound_events.c.status == "applied"
    )
    return len((await conn.execute(query)).all())
