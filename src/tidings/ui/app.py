"""The admin UI's routes, assembled: the public sign-in form, and every other page behind the
session and CSRF guard. `create_app` mounts the result at /admin."""

from __future__ import annotations

from html import escape
from importlib.resources import files

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from tidings.bootstrap import theme_from
from tidings.ui import (
    account,
    audit,
    auth,
    campaign_ab,
    campaign_resends,
    campaign_sends,
    campaigns,
    dashboard,
    inbound,
    jobs,
    media,
    newsletter_feeds,
    newsletters,
    operators,
    outbox,
    person,
    site_settings,
    subscriber_edits,
    subscribers,
    webhooks,
)
from tidings.ui.guard import container_of, guard
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
        newsletter_feeds.router,
        newsletters.router,
        subscriber_edits.router,  # before subscribers: /new and /bulk are not ids
        subscribers.router,
        person.router,  # after subscribers: /import and /export are not ids
        campaigns.router,
        campaign_sends.router,
        campaign_ab.router,
        campaign_resends.router,
        media.router,
        webhooks.router,
        jobs.router,
        inbound.router,
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
    for path, endpoint in _UNGUARDED:
        router.add_api_route(path, endpoint, methods=["GET"])
    router.include_router(auth.public)
    for guarded in guarded_routers():
        router.include_router(guarded, prefix="/admin", dependencies=[Depends(guard)])
    return router


def ui_route_templates() -> list[str]:
    """Every admin UI path template (`/admin/campaigns/{campaign_id}`), for request logs."""
    templates = [path for path, _endpoint in _UNGUARDED]
    templates += [route.path for route in auth.public.routes if hasattr(route, "path")]
    for guarded in guarded_routers():
        templates += ["/admin" + route.path for route in guarded.routes if hasattr(route, "path")]
    return templates


async def _root() -> RedirectResponse:
    # Readers arrive on links to the subscribe and email pages; whoever types the bare host
    # is the operator who just ran `tidings serve`.
    return RedirectResponse("/admin", status_code=303)


# An envelope in the theme's accent: the tab of this site among the operator's others.
FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<rect width="32" height="32" rx="6" fill="{accent}"/>'
    '<path d="M6 9h20v14H6z M6 9l10 8 10-8" fill="none" stroke="{ink}" stroke-width="2.5" '
    'stroke-linejoin="round"/></svg>'
)


async def favicon(request: Request) -> Response:
    """The site's icon (SVG, which Chromium and Firefox take for /favicon.ico as well)."""
    theme = theme_from(container_of(request).settings)
    icon = FAVICON.format(accent=escape(theme.accent_color), ink=escape(theme.button_text_color))
    return Response(
        icon,
        media_type="image/svg+xml",
        headers={"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"},
    )


# Outside the guard: the bare host sends the operator to /admin, and the sign-in page and the
# reader pages show the icon before any session.
_UNGUARDED = (("/", _root), ("/favicon.ico", favicon), ("/admin/favicon.svg", favicon))


async def _script() -> Response:
    return Response(
        _SCRIPT.read_text(encoding="utf-8"),
        media_type="text/javascript",
        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
    )


_static.add_api_route("/static/admin.js", _script, methods=["GET"])
