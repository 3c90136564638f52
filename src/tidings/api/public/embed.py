"""A signup form for any site (API-5): the iframe page and CORS on the JSON subscribe.

The embed page is the one public page other sites may frame: it sets its own
`Content-Security-Policy: frame-ancestors` to this site and the origins in
`http.cors_origins`, and nothing else may frame it. `OPTIONS /api/subscribe` answers a
browser's CORS preflight for those origins only; the POST itself is unchanged (double opt-in,
rate limits, the same answer for every address) and carries `Access-Control-Allow-Origin` for
them. Preflights from any other origin get 403 and no CORS headers.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Path, Request
from fastapi.responses import HTMLResponse, Response

from tidings.api.deps import ContainerDep
from tidings.api.public.json import allowed_origin
from tidings.api.public.pages import (
    ALTCHA_HELP,
    HONEYPOT_HELP,
    MAX_TYPED,
    TRACKING_HELP,
    Typed,
    take_signup,
)
from tidings.config import Settings
from tidings.domain.errors import NotFound
from tidings.domain.tracking import TrackingMode
from tidings.rendering.pages import TrackingBox

router = APIRouter(tags=["public pages"])
Slug = Annotated[str, Path(max_length=64, description="A newsletter's slug.")]
PREFLIGHT_MAX_AGE = "600"


def frame_ancestors(settings: Settings) -> str:
    return " ".join(("frame-ancestors", "'self'", *settings.http.allowed_origins))


def _embed_html(settings: Settings, body: str, status_code: int = 200) -> HTMLResponse:
    return HTMLResponse(
        body,
        status_code=status_code,
        headers={
            "Cache-Control": "no-store",
            "Referrer-Policy": "no-referrer",
            "Content-Security-Policy": frame_ancestors(settings),
        },
    )


async def _newsletter(container: ContainerDep, slug: str) -> tuple[tuple[str, str, str], bool]:
    """The newsletter as the form shows it, and whether it tracks per person (ENG-1)."""
    try:
        row = await container.newsletters.get(slug)
    except NotFound:
        raise NotFound("there is no newsletter at this address") from None
    return (row.slug, row.name, row.description), row.tracking == TrackingMode.PER_PERSON


@router.get("/subscribe/{slug}/embed", response_class=HTMLResponse, summary="Embeddable form")
async def embed_form(container: ContainerDep, slug: Slug) -> HTMLResponse:
    newsletter, per_person = await _newsletter(container, slug)
    page = container.pages.subscribe_embed(
        newsletter,
        action_url=f"/subscribe/{newsletter[0]}/embed",
        tracking=TrackingBox() if per_person else None,
        honeypot=container.settings.audience.honeypot,
        altcha=container.bot_check.enabled,
    )
    return _embed_html(container.settings, page)


@router.post("/subscribe/{slug}/embed", response_class=HTMLResponse, summary="Embedded signup")
async def embed_form_post(
    container: ContainerDep,
    request: Request,
    slug: Slug,
    email: Annotated[str, Form()] = "",
    name: Annotated[str, Form()] = "",
    website: Annotated[str, Form(description=HONEYPOT_HELP)] = "",
    altcha: Annotated[str, Form(max_length=4096, description=ALTCHA_HELP)] = "",
    tracking: Annotated[str, Form(description=TRACKING_HELP)] = "",
) -> HTMLResponse:
    """The thank-you in place (the same for every address), or the form again with the
    reason (422, 429)."""
    newsletter, per_person = await _newsletter(container, slug)
    typed = Typed(
        email[:MAX_TYPED], name[:MAX_TYPED], frozenset({newsletter[0]}), tracking=bool(tracking)
    )
    outcome = await take_signup(container, request, typed, (email, name, website, altcha))
    page = container.pages.subscribe_embed(
        newsletter,
        action_url=f"/subscribe/{newsletter[0]}/embed",
        error=outcome.error,
        email=typed.email if outcome.error else "",
        name=typed.name if outcome.error else "",
        done=outcome.error is None,
        tracking=TrackingBox(ticked=typed.tracking) if per_person else None,
        honeypot=container.settings.audience.honeypot,
        altcha=container.bot_check.enabled,
    )
    response = _embed_html(container.settings, page, outcome.status_code)
    response.headers.update(outcome.headers or {})
    return response


@router.options("/api/subscribe", include_in_schema=False)
async def subscribe_preflight(container: ContainerDep, request: Request) -> Response:
    origin = allowed_origin(container.settings, request)
    if origin is None:
        return Response(status_code=403, headers={"Vary": "Origin"})
    return Response(
        status_code=204,
        headers={
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Methods": "POST",
            "Access-Control-Allow-Headers": "Content-Type",
            "Access-Control-Max-Age": PREFLIGHT_MAX_AGE,
            "Vary": "Origin",
        },
    )
