"""The pages people reach from an email or a signup form (API-1, AUD-5..7).

A GET never changes state (mail scanners open every link): confirm and unsubscribe pages show
a button that POSTs. The one-click unsubscribe POST (RFC 8058) needs no cookie or CSRF token:
the signed token in the URL is the authority. These URLs never change once mail is out.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from tidings.api.deps import ContainerDep
from tidings.api.public.json import client_ip
from tidings.audience.public import LinkProblem, Preference
from tidings.domain import tokens
from tidings.domain.audience import Source, normalise_email, validate_name
from tidings.domain.errors import InvalidInput, NotFound, RateLimited
from tidings.domain.tracking import TrackingMode
from tidings.rendering.pages import PreferenceItem, TrackingBox

router = APIRouter(tags=["public pages"], include_in_schema=True)
# Not `max_length` or a pattern: a reader who follows a mangled link gets the page saying so
# (an HTML 404), not JSON. The routes take the rest of the path (`{token:path}`), so an empty
# token, one with a slash (`%2F`) or an extra segment reaches that page too.
Token = Annotated[str, Path()]
# Every token tidings mints: signed `<id>[-<id>].<signature>`, random URL-safe base64, the
# test-send placeholder. Anything else is refused before it reaches a use case.
WELL_FORMED_TOKEN = re.compile(r"[A-Za-z0-9_.-]{1,100}")
Slug = Annotated[str, Path(description="A newsletter's slug.")]
MAX_TYPED = 320  # longer input is refused anyway; this much is shown back
HONEYPOT_HELP = "Leave empty: a form hidden from people, filled in only by bots."
ALTCHA_HELP = "With audience.altcha on: the solved proof-of-work challenge."
TRACKING_HELP = "Non-empty when the per-person open and click tracking box is ticked."


def _html(body: str, status_code: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    # Pages carry bearer tokens in their URLs: never cache them or leak them onward.
    return HTMLResponse(
        body,
        status_code=status_code,
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", **(headers or {})},
    )


async def _page_or_problem(
    container: ContainerDep,
    render: Callable[[], Awaitable[str]],
    *,
    token: str,
    purpose: Literal["unsubscribe", "preferences"] | None = "unsubscribe",
    status_code: int = 200,
) -> HTMLResponse:
    """The page `render` makes, or the link-problem page (404) for a token that is too long,
    malformed, out of range, expired or unknown. `purpose`: the page a campaign's test-send
    link to this route shows (CMP-5); None where test sends have no such link."""
    if not WELL_FORMED_TOKEN.fullmatch(token):
        return _html(container.pages.link_problem(reason="invalid"), status_code=404)
    if purpose is not None and tokens.is_test_send_token(token):
        # A link from a campaign's test send (CMP-5): no subscriber behind it, and nothing to do.
        return _html(container.pages.test_link(purpose=purpose))
    try:
        return _html(await render(), status_code=status_code)
    except LinkProblem as problem:
        if problem.reason == "expired":
            return _html(container.pages.link_problem(reason="expired"), status_code=404)
        return _html(container.pages.link_problem(reason="invalid"), status_code=404)


@dataclass(frozen=True, slots=True)
class Typed:
    """What the reader put in the form, shown again when it comes back with an error."""

    email: str = ""
    name: str = ""
    chosen: frozenset[str] = frozenset()
    tracking: bool = False  # the per-person tracking box (ENG-1)


async def _subscribe_form(
    container: ContainerDep, typed: Typed = Typed(), error: str | None = None
) -> str:
    rows = await container.newsletters.list()
    newsletters = [(n.slug, n.name, n.description) for n in rows]
    # Asked only where it means something: some newsletter on the form tracks per person.
    per_person = any(n.tracking == TrackingMode.PER_PERSON for n in rows)
    return container.pages.subscribe_form(
        newsletters,
        tracking=TrackingBox(ticked=typed.tracking) if per_person else None,
        action_url="/subscribe",
        error=error,
        email=typed.email,
        name=typed.name,
        chosen=typed.chosen,
        honeypot=container.settings.audience.honeypot,
        altcha=container.bot_check.enabled,
    )


async def _form_for(container: ContainerDep, slug: str | None) -> HTMLResponse:
    """The form, with `slug`'s newsletter ticked; an unknown slug gets the whole form, 404."""
    if slug is None:
        return _html(await _subscribe_form(container))
    known = {n.slug for n in await container.newsletters.list()}
    if slug not in known:
        page = await _subscribe_form(container, error="There is no newsletter at that address.")
        return _html(page, status_code=404)
    return _html(await _subscribe_form(container, Typed(chosen=frozenset({slug}))))


@router.get("/subscribe", response_class=HTMLResponse, summary="Signup form")
async def subscribe_form(
    container: ContainerDep,
    # Unconstrained: a bad slug gets the form and a 404, not the framework's JSON.
    newsletter: Annotated[str | None, Query(description="Tick this newsletter.")] = None,
) -> HTMLResponse:
    return await _form_for(container, newsletter)


@router.post("/subscribe", response_class=HTMLResponse, summary="Signup form post")
async def subscribe_form_post(
    container: ContainerDep,
    request: Request,
    email: Annotated[str, Form()] = "",
    name: Annotated[str, Form()] = "",
    newsletter: Annotated[list[str] | None, Form()] = None,
    website: Annotated[str, Form(description=HONEYPOT_HELP)] = "",
    altcha: Annotated[str, Form(max_length=4096, description=ALTCHA_HELP)] = "",
    tracking: Annotated[str, Form(description=TRACKING_HELP)] = "",
) -> Response:
    """Always answers with a page: the form again, with what was typed and why it failed
    (422, 404 or 429), or a redirect to the thank-you page."""
    typed = Typed(
        email[:MAX_TYPED],
        name[:MAX_TYPED],
        frozenset(s[:64] for s in newsletter or []),
        tracking=bool(tracking),
    )
    outcome = await take_signup(container, request, typed, (email, name, website, altcha))
    if outcome.error is None:
        return RedirectResponse("/subscribe/thanks", status_code=303)
    page = await _subscribe_form(container, typed, error=outcome.error)
    return _html(page, status_code=outcome.status_code, headers=outcome.headers)


@dataclass(frozen=True, slots=True)
class SignupOutcome:
    """What became of a form post: `error` None when it was taken (or silently dropped)."""

    error: str | None = None
    status_code: int = 200
    headers: dict[str, str] | None = None


async def take_signup(
    container: ContainerDep,
    request: Request,
    typed: Typed,
    posted: tuple[str, str, str, str],
) -> SignupOutcome:
    """Subscribe the address to the chosen newsletters, as a form post asks; the same success
    whatever state the address is in (AUD-5). `posted` is the email, name, honeypot and ALTCHA
    fields as sent. A filled honeypot field is a bot: it gets the same success and nothing is
    done; a missing or wrong proof of work gets a 422 that says nothing about the address."""
    email, name, trap, proof = posted
    if trap and container.settings.audience.honeypot:
        return SignupOutcome()
    try:
        await container.bot_check.verify(proof)
    except InvalidInput as refused:
        return SignupOutcome(refused.detail, 422)
    # Fields are checked here rather than by the framework, whose answer would be JSON.
    problem = await _form_problem(container, email, name, typed.chosen)
    if problem is not None:
        return SignupOutcome(problem, 422)
    try:
        for slug in sorted(typed.chosen):
            await container.public.subscribe(
                email=email,
                name=name or None,
                newsletter_slug=slug,
                source=Source.FORM,
                client_ip=client_ip(request),
                tracking_consent=typed.tracking,
            )
    except (InvalidInput, NotFound) as exc:
        return SignupOutcome(exc.detail, 422)
    except RateLimited as exc:
        return SignupOutcome(
            "Too many attempts; try again later.",
            429,
            {"Retry-After": str(exc.retry_after_seconds)},
        )
    return SignupOutcome()


async def _form_problem(
    container: ContainerDep, email: str, name: str, chosen: frozenset[str]
) -> str | None:
    """Why the form cannot be taken as it is, in words for the reader; None when it can."""
    if not email.strip():
        return "Enter your email address."
    try:
        normalise_email(email)
        validate_name(name or None)
    except InvalidInput as exc:
        return exc.detail
    if not chosen:
        return "Choose at least one newsletter."
    if chosen - {n.slug for n in await container.newsletters.list()}:
        return "One of the chosen newsletters no longer exists; choose again."
    return None


@router.get("/subscribe/thanks", response_class=HTMLResponse, summary="After signing up")
async def subscribe_thanks(container: ContainerDep) -> HTMLResponse:
    return _html(container.pages.subscribe_thanks())


@router.get("/subscribe/{slug}", response_class=HTMLResponse, summary="Signup form, one ticked")
async def subscribe_form_for(container: ContainerDep, slug: Slug) -> HTMLResponse:
    return await _form_for(container, slug)


@router.get(
    "/confirm/{token:path}", response_class=HTMLResponse, summary="Confirm page (no change)"
)
async def confirm_page(container: ContainerDep, token: Token) -> HTMLResponse:
    async def render() -> str:
        target = await container.public.confirmation_target(token)
        return container.pages.confirm_prompt(
            newsletter_name=target.newsletter_name, action_url=f"/confirm/{token}"
        )

    return await _page_or_problem(container, render, token=token, purpose=None)


@router.post("/confirm/{token:path}", response_class=HTMLResponse, summary="Confirm (idempotent)")
async def confirm(container: ContainerDep, request: Request, token: Token) -> HTMLResponse:
    async def render() -> str:
        target = await container.public.confirm(token, client_ip=client_ip(request))
        return container.pages.confirmed(
            newsletter_name=target.newsletter_name, preferences_url=target.preferences_url
        )

    return await _page_or_problem(container, render, token=token, purpose=None)


@router.get("/unsubscribe/{token:path}", response_class=HTMLResponse, summary="Unsubscribe page")
async def unsubscribe_page(container: ContainerDep, token: Token) -> HTMLResponse:
    async def render() -> str:
        target = await container.public.unsubscribe_target(token)
        return container.pages.unsubscribe_prompt(
            newsletter_name=target.newsletter_name,
            action_url=f"/unsubscribe/{token}",
            preferences_url=target.preferences_url,
        )

    return await _page_or_problem(container, render, token=token)


@router.post(
    "/unsubscribe/{token:path}",
    response_class=HTMLResponse,
    summary="One-click unsubscribe (RFC 8058: List-Unsubscribe=One-Click)",
)
async def unsubscribe(container: ContainerDep, token: Token) -> HTMLResponse:
    async def render() -> str:
        target = await container.public.unsubscribe(token)
        return container.pages.unsubscribed(
            newsletter_name=target.newsletter_name, preferences_url=target.preferences_url
        )

    return await _page_or_problem(container, render, token=token)


@router.get("/keep/{token:path}", response_class=HTMLResponse, summary="Keep-me-subscribed page")
async def keep_page(container: ContainerDep, token: Token) -> HTMLResponse:
    """The sunset email's link (ENG-7): shows a button; a GET changes nothing."""

    async def render() -> str:
        target = await container.sunset.keep_target(token)
        return _keep_page(container, token, target.newsletter_name, target.outcome)

    return await _page_or_problem(container, render, token=token, purpose=None)


@router.post("/keep/{token:path}", response_class=HTMLResponse, summary="Keep me subscribed")
async def keep(container: ContainerDep, token: Token) -> HTMLResponse:
    """The person answers the sunset email: they stay (idempotent)."""

    async def render() -> str:
        target = await container.sunset.keep(token)
        return _keep_page(container, token, target.newsletter_name, target.outcome)

    return await _page_or_problem(container, render, token=token, purpose=None)


def _keep_page(container: ContainerDep, token: str, name: str, outcome: str | None) -> str:
    return container.pages.keep_prompt(
        newsletter_name=name,
        action_url=f"/keep/{token}",
        outcome=outcome,
        subscribe_url=f"{container.audience.public_url}/subscribe",
    )


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


async def _tracking_box(container: ContainerDep, token: str) -> TrackingBox | None:
    choice = await container.public.tracking_choice(token)
    return TrackingBox(ticked=choice.given) if choice.offered else None


@router.get("/preferences/{token:path}", response_class=HTMLResponse, summary="Preferences page")
async def preferences_page(container: ContainerDep, token: Token) -> HTMLResponse:
    async def render() -> str:
        items = _items(await container.public.preferences(token))
        return container.pages.preferences(
            items=items,
            action_url=f"/preferences/{token}",
            saved=False,
            tracking=await _tracking_box(container, token),
        )

    return await _page_or_problem(container, render, token=token, purpose="preferences")


@router.post("/preferences/{token:path}", response_class=HTMLResponse, summary="Save preferences")
async def save_preferences(
    container: ContainerDep,
    token: Token,
    # Text, not `list[int]`: a mangled form must not answer a reader page with JSON 422.
    newsletter: Annotated[list[str] | None, Form(max_length=1000)] = None,
    tracking: Annotated[str, Form(description=TRACKING_HELP)] = "",
    tracking_shown: Annotated[str, Form(description="Set when the page showed the box.")] = "",
) -> HTMLResponse:
    chosen = newsletter or []
    wanted = {
        int(value) for value in chosen if value.isascii() and value.isdigit() and len(value) <= 18
    }
    if len(wanted) < len(set(chosen)):  # a value that names no newsletter: change nothing

        async def unchanged() -> str:
            items = _items(await container.public.preferences(token))
            return container.pages.preferences(
                items=items,
                action_url=f"/preferences/{token}",
                saved=False,
                tracking=await _tracking_box(container, token),
            )

        return await _page_or_problem(
            container, unchanged, token=token, purpose="preferences", status_code=400
        )

    async def render() -> str:
        # An unticked box posts nothing: only a page that showed it can withdraw by it.
        given = bool(tracking) if tracking_shown else None
        updated = await container.public.update_preferences(token, wanted, tracking=given)
        return container.pages.preferences(
            items=_items(updated),
            action_url=f"/preferences/{token}",
            saved=True,
            tracking=await _tracking_box(container, token),
        )

    return await _page_or_problem(container, render, token=token, purpose="preferences")
