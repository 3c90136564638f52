"""The FastAPI application factory. Nothing is built at import time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline

from tidings import __version__
from tidings.api import health, provider_events
from tidings.api.admin import (
    audience_csv,
    campaign_ab,
    campaign_repairs,
    campaign_resends,
    campaign_sends,
    campaign_stats,
    campaign_status,
    campaigns,
    emails,
    jobs,
    keys,
    media,
    newsletter_feeds,
    newsletters,
    outbox,
    provider,
    received_events,
    subscribers,
    suppressions,
    webhooks,
)
from tidings.api.audit_trail import AuditTrail
from tidings.api.deps import require_accepted_media_type, require_admin_key
from tidings.api.docs_gate import DocsGate
from tidings.api.errors import document_problems, install_error_handlers
from tidings.api.hardening import SiteHardening
from tidings.api.middleware import RequestContext, RequestGuard, RouteTemplates
from tidings.api.public import archive as public_archive
from tidings.api.public import embed as public_embed
from tidings.api.public import json as public_json
from tidings.api.public import media as public_media
from tidings.api.public import pages as public_pages
from tidings.api.public import tracking as public_tracking
from tidings.bootstrap import Container, build, start
from tidings.config import Settings
from tidings.ui.app import ui_route_templates, ui_router

DOCS_ASSETS = "/docs/assets"


def create_app(
    settings: Settings,
    *,
    apply_migrations: bool = False,
    run_workers: bool = False,
    container: Container | None = None,
) -> FastAPI:
    """The API for `settings`. `tidings serve` sets both flags: it migrates on start and runs
    the workers in-process beside the API (the embedded default, ARC-1). Tests may pass a
    `container` of their own (`build(settings, clock=...)`); the app starts and closes it."""
    container = container or build(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await start(container, apply_migrations=apply_migrations)
        stop = asyncio.Event()
        workers = asyncio.create_task(container.run_workers(stop)) if run_workers else None
        try:
            yield
        finally:
            stop.set()
            if workers is not None:
                await workers  # drains in-flight jobs within queue.shutdown_grace_seconds
            await container.close()

    # Swagger UI and ReDoc from assets installed with the package, not a CDN: /docs must work
    # on a machine with no internet (an air-gapped server, a laptop on a train).
    app = FastAPIOffline(
        static_url=DOCS_ASSETS,
        title="tidings",
        version=__version__,
        summary="Newsletters with double opt-in, accounted sends and signed webhooks.",
        lifespan=lifespan,
    )
    app.state.container = container
    install_error_handlers(app)
    fastapi_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document_problems(fastapi_openapi())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    public = [provider_events.router, health.router]  # events: served by ProviderEventsFirst
    if settings.metrics.on_api_port:
        public.append(health.metrics_router)
    public += [public_pages.router, public_archive.router, public_embed.router, public_media.router]
    for router in public:
        app.include_router(router)
    app.include_router(public_json.router, dependencies=[Depends(require_accepted_media_type)])
    app.include_router(admin_router())
    app.include_router(ui_router())  # the admin web UI at /admin (UI-1)
    # Image uploads are binary (NUL bytes) and larger than other bodies: their own limit.
    upload_limit = settings.media.max_upload_bytes + MULTIPART_OVERHEAD_BYTES
    app.add_middleware(
        RequestGuard,
        max_bytes=settings.http.max_body_bytes,
        uploads=dict.fromkeys(MEDIA_UPLOAD_PATHS, upload_limit),
    )
    app.add_middleware(DocsGate, container=container)
    app.add_middleware(
        SiteHardening,
        public_origin=str(settings.site.public_url),
        form_scripts=settings.audience.altcha,
    )
    # From the routers themselves, not the OpenAPI document: generating that costs a
    # quarter of a second of CPU, paid by the first request of every process.
    routes = RouteTemplates(
        lambda: [
            *(path for router in [*public, public_json.router] for path in paths_of(router)),
            *admin_route_templates(),
            "/openapi.json",
            "/docs",
            "/redoc",
            DOCS_ASSETS + "/{file}",
            *ui_route_templates(),
        ]
    )
    app.add_middleware(AuditTrail, audit=container.audit)  # inside RequestContext: its actor
    app.add_middleware(RequestContext, metrics=container.metrics, routes=routes)
    # Outermost: provider events come by the thousand and need none of the above (PRV-6).
    app.add_middleware(provider_events.ProviderEventsFirst, container=container)
    # Opens and clicks too, by the thousand a second in a campaign's first minutes (ENG-3).
    app.add_middleware(public_tracking.TrackingFirst, container=container)
    return app


def create_metrics_app(container: Container) -> FastAPI:
    """Only `/metrics`, for its own port (`metrics.port`): the API's app, or a worker, owns
    and starts `container`; this app just reads it."""
    app = FastAPI(title="tidings metrics", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.container = container
    app.include_router(health.metrics_router)
    return app


ADMIN_PREFIX = "/api/admin"
# The routes that take an image upload (the API's and the admin UI's forms).
MEDIA_UPLOAD_PATHS = ("/api/admin/media", "/admin/media")
MULTIPART_OVERHEAD_BYTES = 65_536  # the alt text, the CSRF token, the part headers
ADMIN_MODULES = (
    newsletters,
    newsletter_feeds,
    audience_csv,  # before `subscribers`: /subscribers/export is not /subscribers/{id}
    subscribers,
    suppressions,
    campaigns,
    campaign_sends,
    campaign_status,
    campaign_stats,
    campaign_ab,
    campaign_resends,
    campaign_repairs,
    keys,
    jobs,
    emails,
    outbox,
    provider,
    webhooks,
    received_events,
    media,
)


def admin_router() -> APIRouter:
    """Every admin route hangs off this router, which requires an admin API key."""
    router = APIRouter(
        prefix=ADMIN_PREFIX,
        dependencies=[Depends(require_admin_key), Depends(require_accepted_media_type)],
    )
    for module in ADMIN_MODULES:
        router.include_router(module.router)
    return router


def admin_route_templates() -> list[str]:
    """Every admin API path template, in routing order (for request logs and metrics)."""
    return [path for module in ADMIN_MODULES for path in paths_of(module.router, ADMIN_PREFIX)]


def paths_of(router: APIRouter, prefix: str = "") -> list[str]:
    """The path templates of a router's own routes, under `prefix`."""
    return [prefix + route.path for route in router.routes if isinstance(route, APIRoute)]
