"""Shared route dependencies: the container and admin authentication."""

from __future__ import annotations

from typing import Annotated

import structlog
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from tidings.bootstrap import Container
from tidings.domain.errors import Unauthenticated

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
