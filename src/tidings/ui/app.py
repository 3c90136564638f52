"""The admin UI's routes, assembled: the public sign-in form, and every other page behind the
session and CSRF guard. `create_app` mounts the result at /admin."""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, Depends
from fastapi.responses import RedirectResponse, Response

from tidings.ui import (
    account,
    audit,
    auth,
    campaign_sends,
    campaigns,
    dashboard,
    jobs,
    newsletters,
    operators,
    outbox,
    site_settings,
    subscriber_edits,
    subscribers,
    webhooks,
)
from tidings.ui.guard import guard
from tidings.ui.templating import UiRoute

# The one script: progress bars, live previews and confirmations. Served, never inlined, so
# the Content-Security-Policy can forbid inline scripts.
_SCRIPT = files("tidings.ui").joinpath("static/admin.js")


_static = APIRouter(route_class=UiRoute)


def guarded_routers() -> tuple[APIRouter, ...]:
    """Every router mounted behind the guard at /admin (the security test walks these)."""
    return (
        _static,
        auth.router,
        dashboard.router,
        newsletters.router,
        subscriber_edits.router,  # before subscribers: /new and /bulk are not ids
        subscribers.router,
        campaigns.router,
        campaign_sends.router,
        webhooks.router,
        jobs.router,
        outbox.router,
        account.router,
        operators.router,
        audit.router,
        site_settings.router,
    )


def ui_router() -> APIRouter:
    """Every admin UI route. Pages other than sign-in answer 303 to it without a session, and
    every form post without the session's CSRF token answers 403."""
    router = APIRouter(include_in_schema=False)
    router.add_api_route("/", _root, methods=["GET"])
    router.include_router(auth.public)
    for guarded in guarded_routers():
        router.include_router(guarded, prefix="/admin", dependencies=[Depends(guard)])
    return router


def ui_route_templates() -> list[str]:
    """Every admin UI path template (`/admin/campaigns/{campaign_id}`), for request logs."""
    templates = ["/admin/sign-in", "/admin/sign-in/code"]
    for guarded in guarded_routers():
        templates += ["/admin" + route.path for route in guarded.routes if hasattr(route, "path")]
    return templates


async def _root() -> RedirectResponse:
    # Readers arrive on links to the subscribe and email pages; whoever types the bare host
    # is the operator who just ran `tidings serve`.
    return RedirectResponse("/admin", status_code=303)


async def _script() -> Response:
    return Response(
        _SCRIPT.read_text(encoding="utf-8"),
        media_type="text/javascript",
        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
    )


_static.add_api_route("/static/admin.js", _script, methods=["GET"])
