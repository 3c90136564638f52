"""Alembic, driven from code: upgrade, downgrade and the readiness check.

Migrations run inside one write transaction. On PostgreSQL a transaction-scoped advisory lock
makes processes that start together (an API and several workers) migrate one at a time.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

from tidings.storage.database import Database

_SCRIPT_LOCATION = Path(__file__).parent / "migrations"
_MIGRATION_LOCK_ID = 0x7469_6469  # "tidi": an arbitrary, fixed advisory lock key


def _config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_SCRIPT_LOCATION))
    config.attributes["connection"] = connection
    return config


@cache
def head_revisions() -> tuple[str, ...]:
    return tuple(ScriptDirectory.from_config(_config()).get_heads())


def _lock(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_ID})


async def upgrade(db: Database, revision: str = "head") -> None:
    def run(connection: Connection) -> None:
        _lock(connection)
        command.upgrade(_config(connection), revision)

    async with db.write() as conn:
        await conn.run_sync(run)


async def downgrade(db: Database, revision: str) -> None:
    def run(connection: Connection) -> None:
        _lock(connection)
        command.downgrade(_config(connection), revision)

    async with db.write() as conn:
        await conn.run_sync(run)


async def current_revisions(db: Database) -> tuple[str, ...]:
    def read(connection: Connection) -> tuple[str, ...]:
        return tuple(MigrationContext.configure(connection).get_current_heads())

    async with db.read() as conn:
        return await conn.run_sync(read)


async def is_at_head(db: Database) -> bool:
    return set(await current_revisions(db)) == set(head_revisions())
