"""Factories for test objects: settings, a running app client, an admin key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from asgi_lifespan import LifespanManager
from fastapi import FastAPI

from tidings.api.app import create_app
from tidings.bootstrap import Container, build, utcnow
from tidings.config import Settings, load_settings
from tidings.delivery.provider import PerRecipientProvider
from tidings.delivery.webhook_client import WebhookClient
from tidings.domain.clock import Clock

# App start-up (migrations, the container, in-process workers) on a loaded CI machine can take
# well over asgi-lifespan's default of 5 s; a slow start is not what these tests are about.
STARTUP_SECONDS = 60


def make_settings(database_url: str, **sections: dict[str, Any]) -> Settings:
    return load_settings(database={"url": database_url}, log={"format": "json"}, **sections)


def real_mail(**email: Any) -> dict[str, dict[str, Any]]:
    """Settings sections for sending through a real provider (`email` names it): tidings
    refuses real mail under the placeholder identity, so these give the publisher one."""
    return {
        "email": {"from_address": "desk@news.example.org", **email},
        "theme": {"postal_address": "The Test Gazette, 1 Quay Street, Porthaven"},
        "site": {"public_url": "https://news.example.org"},
    }


@asynccontextmanager
async def api_client(
    settings: Settings,
    *,
    apply_migrations: bool = True,
    clock: Clock = utcnow,
    email_provider: PerRecipientProvider | None = None,
    webhook_client: WebhookClient | None = None,
) -> AsyncIterator[tuple[httpx.AsyncClient, Container]]:
    """The real ASGI app, lifespan run, reached over httpx's in-process transport. Pass a
    test clock (`tests.support.clock.Clock`) to move time under the app, a provider double
    (the world outside) to stand in for the relay, and a webhook client (with a fake DNS
    resolver, say)."""
    container = build(
        settings, clock=clock, email_provider=email_provider, webhook_client=webhook_client
    )
    app: FastAPI = create_app(settings, apply_migrations=apply_migrations, container=container)
    async with LifespanManager(app, startup_timeout=STARTUP_SECONDS) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://tidings.test") as client:
            yield client, app.state.container


async def admin_headers(container: Container, name: str = "tests") -> dict[str, str]:
    created = await container.api_keys.create(name)
    return {"Authorization": f"Bearer {created.token}"}
