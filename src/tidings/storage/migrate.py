"""Alembic, driven from code: upgrade, downgrade, and the heads of the migration scripts.

Migrations run inside one write transaction. On PostgreSQL a transaction-scoped advisory lock
makes processes that start together (an API and several workers) migrate one at a time.

Alembic (about 6 MB of memory, more with the scripts it loads) is imported when a migration
runs, not with this module: processes that only check the revision (storage/revision.py) never
load it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, text

from tidings.storage.database import Database
from tidings.storage.dialect import is_postgresql

if TYPE_CHECKING:
    from alembic.config import Config

_SCRIPT_LOCATION = Path(__file__).parent / "migrations"
_MIGRATION_LOCK_ID = 0x7469_6469  # "tidi": an arbitrary, fixed advisory lock key


def _config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_SCRIPT_LOCATION))
    config.attributes["connection"] = connection
    return config


@cache
def head_revisions() -> tuple[str, ...]:
    """The heads of the migration scripts, as Alembic finds them (revision.HEAD_REVISIONS
    is checked against this)."""
    from alembic.script import ScriptDirectory

    return tuple(ScriptDirectory.from_config(_config()).get_heads())


def _lock(connection: Connection) -> None:
    if is_postgresql(connection):
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_ID})


async def upgrade(db: Database, revision: str = "head") -> None:
    from alembic import command

    def run(connection: Connection) -> None:
        _lock(connection)
        command.upgrade(_config(connection), revision)

    async with db.write() as conn:
        await conn.run_sync(run)


async def downgrade(db: Database, revision: str) -> None:
    from alembic import command

    def run(connection: Connection) -> None:
        _lock(connection)
        command.downgrade(_config(connection), revision)

    async with db.write() as conn:
        await conn.run_sync(run)
