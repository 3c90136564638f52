"""Shared route dependencies: the container and admin authentication."""

from __future__ import annotations

from typing import Annotated

import structlog
from fastapi import Depends, Request
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from tidings.bootstrap import Container
from tidings.domain.errors import Unauthenticated, UnsupportedMediaType

_bearer = HTTPBearer(auto_error=False, description="An admin API key: `tdk_...`")


def get_container(request: Request) -> Container:
    container: Container = request.app.state.container
    return container


ContainerDep = Annotated[Container, Depends(get_container)]


async def require_admin_key(
    container: ContainerDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The id of the admin API key the request carries (the actor in audit records)."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthenticated("send an admin API key as `Authorization: Bearer <key>`")
    key = await container.api_keys.authenticate(credentials.credentials)
    structlog.contextvars.bind_contextvars(api_key_id=key.id)
    return key.id


AdminKeyId = Annotated[str, Depends(require_admin_key)]


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
    if not accepted or not await request.body():
        return
    sent = _media_type(request.headers.get("content-type", ""))
    if sent in accepted or ("application/json" in accepted and sent.endswith("+json")):
        return
    raise UnsupportedMediaType(f"send the body as {' or '.join(accepted)}")
