"""The schema revision a database is at, and whether it is the latest: read with plain
SQLAlchemy, so that the processes which only check it at start (a worker, the API, any data
command) never import Alembic and its migration scripts; only `storage/migrate.py` runs them.
"""

from __future__ import annotations

from sqlalchemy import Column, Connection, MetaData, String, Table, inspect, select

from tidings.storage.database import Database

# The newest migration's revision. A new migration moves it; a unit test compares it with the
# heads Alembic finds in storage/migrations/versions, so the two cannot drift apart.
HEAD_REVISIONS: tuple[str, ...] = ("0035",)

# Alembic's own bookkeeping table (its default name and shape), read here, written only by it.
_version = Table("alembic_version", MetaData(), Column("version_num", String(32), primary_key=True))


def _read(connection: Connection) -> tuple[str, ...]:
    if not inspect(connection).has_table(_version.name):
        return ()  # never migrated
    return tuple(connection.execute(select(_version.c.version_num)).scalars())


async def current_revisions(db: Database) -> tuple[str, ...]:
    """The revisions recorded in the database: empty before the first migration."""
    async with db.read() as conn:
        return await conn.run_sync(_read)


async def is_at_head(db: Database) -> bool:
    return set(await current_revisions(db)) == set(HEAD_REVISIONS)
