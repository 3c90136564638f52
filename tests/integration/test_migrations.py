"""Migrations produce exactly the table definitions and round-trip (HOUSE rule 6, ARC-4)."""

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect

from tidings.storage import migrate, revision
from tidings.storage.database import Database, create_database
from tidings.storage.tables import metadata


def _diff(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, metadata))


def _tables(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names()) - {"alembic_version"}


async def test_upgrade_head_matches_table_definitions(db: Database) -> None:
    """A model change without a migration would work in tests and break every upgrade."""
    async with db.read() as conn:
        assert await conn.run_sync(_diff) == []
    assert await revision.is_at_head(db)


async def test_downgrade_and_upgrade_round_trip(db: Database) -> None:
    """An operator must be able to roll back a release and roll forward again."""
    await migrate.downgrade(db, "base")
    async with db.read() as conn:
        assert await conn.run_sync(_tables) == set()
    assert not await revision.is_at_head(db)
    await migrate.upgrade(db)
    async with db.read() as conn:
        assert await conn.run_sync(_tables) == set(metadata.tables)
        assert await conn.run_sync(_diff) == []


async def test_upgrade_is_idempotent(empty_database_url: str) -> None:
    """`tidings serve` migrates on every start; a second run must be a no-op."""
    database = create_database(empty_database_url)
    try:
        await migrate.upgrade(database)
        await migrate.upgrade(database)
        assert await revision.current_revisions(database) == migrate.head_revisions()
    finally:
        await database.dispose()


def test_the_known_head_is_the_newest_migration() -> None:
    """Workers check the revision against HEAD_REVISIONS without Alembic: a new migration
    that does not move it would make every process refuse a migrated database (or accept an
    old one)."""
    assert migrate.head_revisions() == revision.HEAD_REVISIONS


async def test_the_revision_is_read_without_alembic(empty_database_url: str) -> None:
    """Before the first migration there is no version table: the revision is none, not an
    error, so `tidings worker` on an empty database says to run `tidings migrate`."""
    database = create_database(empty_database_url)
    try:
        assert await revision.current_revisions(database) == ()
        assert not await revision.is_at_head(database)
        await migrate.upgrade(database)
        assert await revision.current_revisions(database) == revision.HEAD_REVISIONS
        assert await revision.is_at_head(database)
    finally:
        await database.dispose()
