"""Public JSON endpoints: subscribe, confirm, unsubscribe, preferences (API-1)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response, status
from pydantic import BaseModel, Field

from tidings.api.deps import ContainerDep
from tidings.api.schemas import EmailAddress, HeaderText
from tidings.config import Settings
from tidings.domain.audience import Source
from tidings.domain.errors import NotFound

router = APIRouter(prefix="/api", tags=["public"])
Token = Annotated[str, Path(max_length=100)]
ACCEPTED = "If the address can be subscribed, a confirmation email is on its way."


class SubscribeRequest(BaseModel):
    email: EmailAddress
    name: HeaderText | None = Field(default=None, max_length=200)
    newsletter: str = Field(max_length=64, description="The newsletter's slug.")
    tracking_consent: bool = Field(
        default=False,
        description="The person ticked the box letting us see which emails they open and which "
        "links they click (ENG-1); recorded when they confirm.",
    )
    altcha: str | None = Field(
        default=None,
        max_length=4096,
        description="With audience.altcha on: the solved challenge (base64 JSON payload).",
    )


class SubscribeAccepted(BaseModel):
    status: str = "accepted"
    detail: str = ACCEPTED


class TokenRequest(BaseModel):
    token: str = Field(max_length=100)


class LinkResult(BaseModel):
    status: str
    newsletter: str


class PreferenceItem(BaseModel):
    newsletter_id: int
    name: str
    description: str
    subscribed: bool = Field(description="Confirmed and not left.")
    awaiting_confirmation: bool = Field(
        default=False, description="Asked for; the emailed confirmation link is not used yet."
    )


class PreferencesUpdate(BaseModel):
    newsletters: list[int] = Field(max_length=1000, description="Ids to stay subscribed to.")
    tracking_consent: bool | None = Field(
        default=None,
        description="Give (true) or withdraw (false) consent to per-person open and click "
        "tracking; absent leaves it as it is.",
    )


def allowed_origin(settings: Settings, request: Request) -> str | None:
    """The request's Origin when it is one of `http.cors_origins`; otherwise None."""
    origin = request.headers.get("origin", "").lower().rstrip("/")
    return origin if origin and origin in settings.http.allowed_origins else None


def client_ip(request: Request) -> str | None:
    return request.client.host if request.client else None


@router.post(
    "/subscribe", status_code=status.HTTP_202_ACCEPTED, summary="Subscribe (double opt-in)"
)
async def subscribe(
    container: ContainerDep, request: Request, response: Response, body: SubscribeRequest
) -> SubscribeAccepted:
    """The same answer for new, pending, confirmed and unsubscribed addresses. Browsers on
    the sites in `http.cors_origins` may call it (docs/publishing.md)."""
    response.headers["Vary"] = "Origin"
    origin = allowed_origin(container.settings, request)
    if origin is not None:
        response.headers["Access-Control-Allow-Origin"] = origin
    await container.bot_check.verify(body.altcha)
    await container.public.subscribe(
        email=body.email,
        name=body.name,
        newsletter_slug=body.newsletter,
        source=Source.API,
        client_ip=client_ip(request),
        tracking_consent=body.tracking_consent,
    )
    return SubscribeAccepted()


@router.get("/altcha/challenge", summary="A proof-of-work challenge for a signup")
async def altcha_challenge(container: ContainerDep) -> dict[str, Any]:
    """With audience.altcha on, every signup must carry this challenge solved (ALTCHA v1)."""
    if not container.bot_check.enabled:
        raise NotFound("the proof-of-work check is off (audience.altcha)")
    return container.bot_check.challenge()


@router.post("/confirm", summary="Confirm a subscription with the emailed token")
async def confirm(container: ContainerDep, request: Request, body: TokenRequest) -> LinkResult:
    target = await container.public.confirm(body.token, client_ip=client_ip(request))
    return LinkResult(status="confirmed", newsletter=target.newsletter_name)


@router.post("/unsubscribe", summary="Unsubscribe with the token from an email")
async def unsubscribe(container: ContainerDep, body: TokenRequest) -> LinkResult:
    target = await container.public.unsubscribe(body.token)
    return LinkResult(status="unsubscribed", newsletter=target.newsletter_name)


@router.get("/preferences/{token}", summary="The person's newsletters and their state")
async def get_preferences(container: ContainerDep, token: Token) -> list[PreferenceItem]:
    return [PreferenceItem(**asdict(p)) for p in await container.public.preferences(token)]


@router.put("/preferences/{token}", summary="Choose which newsletters to receive")
async def put_preferences(
    container: ContainerDep, token: Token, body: PreferencesUpdate
) -> list[PreferenceItem]:
    updated = await container.public.update_preferences(
        token, set(body.newsletters), tracking=body.tracking_consent
    )
    return [PreferenceItem(**asdict(p)) for p in updated]
