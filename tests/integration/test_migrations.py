"""Migrations produce exactly the table definitions and round-trip (HOUSE rule 6, ARC-4)."""

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect

from tidings.storage import migrate
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
    assert await migrate.is_at_head(db)


async def test_downgrade_and_upgrade_round_trip(db: Database) -> None:
    """An operator must be able to roll back a release and roll forward again."""
    await migrate.downgrade(db, "base")
    async with db.read() as conn:
        assert await conn.run_sync(_tables) == set()
    assert not await migrate.is_at_head(db)
    await migrate.upgrade(db)
    async with db.read() as conn:
        assert await conn.run_sync(_tables) == set(metadata.tables)
        assert await conn.run_sync(_diff) == []


async def test_upgrade_is_idempotent(database_url: str) -> None:
    """`tidings serve` migrates on every start; a second run must be a no-op."""
    database = create_database(database_url)
    try:
        await migrate.upgrade(database)
        await migrate.upgrade(database)
        assert await migrate.current_revisions(database) == migrate.head_revisions()
    finally:
        await database.dispose()
