"""The pages people reach from an email or a signup form (API-1, AUD-5..7).

A GET never changes state (mail scanners open every link): confirm and unsubscribe pages show
a button that POSTs. The one-click unsubscribe POST (RFC 8058) needs no cookie or CSRF token:
the signed token in the URL is the authority. These URLs never change once mail is out.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Form, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from tidings.api.deps import ContainerDep
from tidings.api.public.json import client_ip
from tidings.audience.public import LinkProblem, Preference
from tidings.domain.audience import Source
from tidings.domain.errors import InvalidInput, NotFound, RateLimited
from tidings.rendering.pages import PreferenceItem

router = APIRouter(tags=["public pages"], include_in_schema=True)
Token = Annotated[str, Path(max_length=100)]


def _html(body: str, status_code: int = 200) -> HTMLResponse:
    # Pages carry bearer tokens in their URLs: never cache them or leak them onward.
    return HTMLResponse(
        body,
        status_code=status_code,
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
    )


async def _page_or_problem(
    container: ContainerDep, render: Callable[[], Awaitable[str]]
) -> HTMLResponse:
    try:
        return _html(await render())
    except LinkProblem as problem:
        if problem.reason == "expired":
            return _html(container.pages.link_problem(reason="expired"), status_code=404)
        return _html(container.pages.link_problem(reason="invalid"), status_code=404)


async def _subscribe_form(container: ContainerDep, error: str | None = None) -> str:
    newsletters = [(n.slug, n.name, n.description) for n in await container.newsletters.list()]
    return container.pages.subscribe_form(newsletters, action_url="/subscribe", error=error)


@router.get("/subscribe", response_class=HTMLResponse, summary="Signup form")
async def subscribe_form(container: ContainerDep) -> HTMLResponse:
    return _html(await _subscribe_form(container))


@router.post("/subscribe", response_class=HTMLResponse, summary="Signup form post")
async def subscribe_form_post(
    container: ContainerDep,
    request: Request,
    email: Annotated[str, Form(max_length=320)],
    newsletter: Annotated[str, Form(max_length=64)],
    name: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    try:
        await container.public.subscribe(
            email=email,
            name=name,
            newsletter_slug=newsletter,
            source=Source.FORM,
            client_ip=client_ip(request),
        )
    except (InvalidInput, NotFound) as exc:
        return _html(await _subscribe_form(container, error=exc.detail), status_code=422)
    except RateLimited as exc:
        page = await _subscribe_form(container, error="Too many attempts; try again later.")
        response = _html(page, status_code=429)
        response.headers["Retry-After"] = str(exc.retry_after_seconds)
        return response
    return RedirectResponse("/subscribe/thanks", status_code=303)


@router.get("/subscribe/thanks", response_class=HTMLResponse, summary="After signing up")
async def subscribe_thanks(container: ContainerDep) -> HTMLResponse:
    return _html(container.pages.subscribe_thanks())


@router.get("/confirm/{token}", response_class=HTMLResponse, summary="Confirm page (no change)")
async def confirm_page(container: ContainerDep, token: Token) -> HTMLResponse:
    async def render() -> str:
        target = await container.public.confirmation_target(token)
        return container.pages.confirm_prompt(
            newsletter_name=target.newsletter_name, action_url=f"/confirm/{token}"
        )

    return await _page_or_problem(container, render)


@router.post("/confirm/{token}", response_class=HTMLResponse, summary="Confirm (idempotent)")
async def confirm(container: ContainerDep, request: Request, token: Token) -> HTMLResponse:
    async def render() -> str:
        target = await container.public.confirm(token, client_ip=client_ip(request))
        return container.pages.confirmed(
            newsletter_name=target.newsletter_name, preferences_url=target.preferences_url
        )

    return await _page_or_problem(container, render)


@router.get("/unsubscribe/{token}", response_class=HTMLResponse, summary="Unsubscribe page")
async def unsubscribe_page(container: ContainerDep, token: Token) -> HTMLResponse:
    async def render() -> str:
        target = await container.public.unsubscribe_target(token)
        return container.pages.unsubscribe_prompt(
            newsletter_name=target.newsletter_name,
            action_url=f"/unsubscribe/{token}",
            preferences_url=target.preferences_url,
        )

    return await _page_or_problem(container, render)


@router.post(
    "/unsubscribe/{token}",
    response_class=HTMLResponse,
    summary="One-click unsubscribe (RFC 8058: List-Unsubscribe=One-Click)",
)
async def unsubscribe(container: ContainerDep, token: Token) -> HTMLResponse:
    async def render() -> str:
        target = await container.public.unsubscribe(token)
        return container.pages.unsubscribed(
            newsletter_name=target.newsletter_name, preferences_url=target.preferences_url
        )

    return await _page_or_problem(container, render)


def _items(preferences: list[Preference]) -> list[PreferenceItem]:
    return [
        PreferenceItem(
            newsletter_id=p.newsletter_id,
            name=p.name,
            description=p.description,
            subscribed=p.subscribed,
            awaiting_confirmation=p.awaiting_confirmation,
        )
        for p in preferences
    ]


@router.get("/preferences/{token}", response_class=HTMLResponse, summary="Preferences page")
async def preferences_page(container: ContainerDep, token: Token) -> HTMLResponse:
    async def render() -> str:
        items = _items(await container.public.preferences(token))
        return container.pages.preferences(
            items=items, action_url=f"/preferences/{token}", saved=False
        )

    return await _page_or_problem(container, render)


@router.post("/preferences/{token}", response_class=HTMLResponse, summary="Save preferences")
async def save_preferences(
    container: ContainerDep,
    token: Token,
    newsletter: Annotated[list[int] | None, Form(max_length=1000)] = None,
) -> HTMLResponse:
    async def render() -> str:
        updated = await container.public.update_preferences(token, set(newsletter or []))
        return container.pages.preferences(
            items=_items(updated), action_url=f"/preferences/{token}", saved=True
        )

    return await _page_or_problem(container, render)
