"""Shared route dependencies: the container and admin authentication."""

from __future__ import annotations

from typing import Annotated

import structlog
from fastapi import Depends, Request
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from tidings.access.keys import ApiKeyRow
from tidings.bootstrap import Container
from tidings.domain.audit import Actor
from tidings.domain.errors import Unauthenticated, UnsupportedMediaType
from tidings.domain.roles import Forbidden, Role, required_role

_bearer = HTTPBearer(auto_error=False, description="An admin API key: `tdk_...`")


async def get_container(request: Request) -> Container:
    # async: FastAPI runs a plain `def` dependency in a worker thread, a hop per request
    container: Container = request.app.state.container
    return container


ContainerDep = Annotated[Container, Depends(get_container)]


def route_template(request: Request) -> str:
    """The matched route's path template (`/api/admin/campaigns/{campaign_id}`)."""
    route = request.scope.get("route")
    return str(getattr(route, "path", request.url.path))


async def require_admin_key(
    request: Request,
    container: ContainerDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """Every admin API route: a live key whose role allows this method on this route
    (`domain.roles.required_role`, the policy the admin UI uses too). Returns the key's id,
    the actor in audit records; the key itself is kept in `request.state.api_key`."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthenticated("send an admin API key as `Authorization: Bearer <key>`")
    key = await container.api_keys.authenticate(credentials.credentials)
    structlog.contextvars.bind_contextvars(api_key_id=key.id)
    needed = required_role(request.method, route_template(request))
    if not Role(key.role).allows(needed):
        raise Forbidden(f"this needs an {needed} key; this key is {key.role}")
    request.state.api_key = key
    return key.id


AdminKeyId = Annotated[str, Depends(require_admin_key)]


def key_actor(request: Request, key_id: AdminKeyId) -> Actor:
    """The audit log's actor for this request: its API key and client address."""
    return Actor.api_key(key_id, request.client.host if request.client else None)


KeyActor = Annotated[Actor, Depends(key_actor)]


def calling_key(request: Request, _key_id: AdminKeyId) -> ApiKeyRow:
    key: ApiKeyRow = request.state.api_key
    return key


CallingKey = Annotated[ApiKeyRow, Depends(calling_key)]


def accepted_media_types(route: object) -> tuple[str, ...]:
    """The body media types a route reads: those its OpenAPI request body declares (the CSV
    import), else JSON for a route with a body model, else none (no body is read)."""
    if not isinstance(route, APIRoute):
        return ()
    declared = (route.openapi_extra or {}).get("requestBody", {}).get("content", {})
    if declared:
        return tuple(declared)
    return ("application/json",) if route.body_field is not None else ()


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


async def require_accepted_media_type(request: Request) -> None:
    """415 for a body whose Content-Type the route does not read, or that has none
    (docs/api.md), rather than a 422 saying the body "should be a valid dictionary".
    `application/<anything>+json` counts as JSON."""
    accepted = accepted_media_types(request.scope.get("route"))
    sent = _media_type(request.headers.get("content-type", ""))
    # Checked before the body is read: a multipart form has been parsed, its stream consumed.
    if sent in accepted or ("application/json" in accepted and sent.endswith("+json")):
        return
    if not accepted or not await request.body():
        return
    raise UnsupportedMediaType(f"send the body as {' or '.join(accepted)}")
