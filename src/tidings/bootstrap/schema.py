"""The database's schema, for the entry points (which never import storage themselves): the
revision it is at beside the latest this code knows, and migrating it."""

from __future__ import annotations

from dataclasses import dataclass

from tidings.bootstrap.container import Container
from tidings.storage import revision


@dataclass(frozen=True)
class SchemaRevision:
    """The database's migration revision, and whether it is the latest this code knows."""

    current: str
    latest: str

    @property
    def at_head(self) -> bool:
        return self.current == self.latest

    def describe(self) -> str:
        if self.at_head:
            return f"revision {self.current} (the latest)"
        return f"revision {self.current}, not the latest ({self.latest}): run `tidings migrate`"


async def schema_revision(container: Container) -> SchemaRevision:
    """The database's revision, beside the latest this code knows."""
    current = await revision.current_revisions(container.db)
    return SchemaRevision(", ".join(current) or "base", ", ".join(revision.HEAD_REVISIONS))


async def schema_at_head(container: Container) -> bool:
    return await revision.is_at_head(container.db)


async def migrate_schema(container: Container, *, downgrade_to: str | None = None) -> str:
    """Upgrade the database to the latest revision, or roll it back to `downgrade_to`
    (`base`: empty); the revision it is at afterwards. Alembic is loaded only here."""
    from tidings.storage import migrate

    if downgrade_to:
        await migrate.downgrade(container.db, downgrade_to)
    else:
        await migrate.upgrade(container.db)
    return (await schema_revision(container)).current
