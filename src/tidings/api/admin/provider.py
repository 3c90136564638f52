"""Checking the configured email provider's connection from the API (issue 23, item 4): the
same steps as `tidings smtp check` / `tidings mailgun check`, for the dashboard's button."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel

from tidings.api.deps import ContainerDep
from tidings.bootstrap import check_email_provider
from tidings.delivery.connection_check import ConnectionCheck

router = APIRouter(prefix="/provider", tags=["admin: provider"])


class CheckStepPublic(BaseModel):
    name: str
    ok: bool
    detail: str
    milliseconds: int


class ProviderCheckPublic(BaseModel):
    """What the provider answered at each step; `ok` when every step passed. The local
    capture provider has nothing to connect to: no steps, ok."""

    provider: Literal["capture", "smtp", "mailgun"]
    target: str
    ok: bool
    steps: list[CheckStepPublic]

    @classmethod
    def of(cls, check: ConnectionCheck | None) -> ProviderCheckPublic:
        if check is None:
            return cls(provider="capture", target="the local outbox", ok=True, steps=[])
        steps = [CheckStepPublic(**vars(step)) for step in check.steps]
        return cls(provider=check.provider, target=check.target, ok=check.ok, steps=steps)


@router.post("/check")
async def check_provider(container: ContainerDep) -> ProviderCheckPublic:
    """Connect to the configured provider and report each step (sends nothing)."""
    return ProviderCheckPublic.of(await check_email_provider(container.settings))
