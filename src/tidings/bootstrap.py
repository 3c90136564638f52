"""The composition root: settings -> database -> services. Nothing else reads settings.

Entrypoints (the API, the CLI, workers) call `build()` and get a `Container`; nothing is
constructed at import time.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from tidings.access.keys import ApiKeys
from tidings.config import Settings
from tidings.observability.metrics import Metrics
from tidings.storage import migrate
from tidings.storage.database import Database, create_database
from tidings.storage.site_secrets import get_or_create_secret


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Container:
    """Everything one process needs, built once from settings."""

    settings: Settings
    db: Database
    metrics: Metrics
    api_keys: ApiKeys
    site_secret: str | None = None

    async def close(self) -> None:
        await self.db.dispose()


def build(settings: Settings) -> Container:
    db = create_database(
        settings.database.url,
        busy_timeout_ms=settings.database.sqlite_busy_timeout_ms,
        pool_size=settings.database.pool_size,
    )
    return Container(
        settings=settings,
        db=db,
        metrics=Metrics(),
        api_keys=ApiKeys(db, utcnow),
    )


async def start(container: Container, *, apply_migrations: bool) -> None:
    """Bring the container up: migrate if asked, then load the site secret."""
    if apply_migrations:
        await migrate.upgrade(container.db)
    configured = container.settings.site.secret
    if configured is not None:
        container.site_secret = configured.get_secret_value()
    elif await migrate.is_at_head(container.db):
        async with container.db.write() as conn:
            container.site_secret = await get_or_create_secret(
                conn, "site", candidate=secrets.token_urlsafe(32), now=utcnow()
            )


@asynccontextmanager
async def running(settings: Settings, *, apply_migrations: bool) -> AsyncIterator[Container]:
    container = build(settings)
    try:
        await start(container, apply_migrations=apply_migrations)
        yield container
    finally:
        await container.close()
