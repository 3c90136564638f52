"""Provider event webhooks (PRV-6): Mailgun posts delivery, bounce and complaint events here.

Not behind an API key: the provider proves itself with the body's signature. 2xx only once
the event is durably recorded; a forged, stale or replayed signature gets 401/409 and changes
nothing (docs/deliverability.md).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from tidings.api.deps import ContainerDep
from tidings.bootstrap import Container

router = APIRouter(prefix="/api/events", tags=["provider events"])


class EventReceived(BaseModel):
    outcome: str = Field(
        description="applied, unmatched (no such subscriber), ignored (a kind tidings does "
        "not act on), duplicate (heard before), unparsed (kept for the operator) or confirmed "
        "(an SNS subscription)"
    )


async def capped_body(request: Request, container: Container) -> bytes:
    """The request body, refused (413) as soon as it passes `inbound.max_event_bytes`."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        container.provider_events.check_size(len(body))
    return bytes(body)


@router.post(
    "/mailgun",
    summary="Receive a Mailgun event webhook (signed)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
)
async def mailgun(request: Request, container: ContainerDep) -> EventReceived:
    body = await capped_body(request, container)
    outcome = await container.provider_events.mailgun(body, now=container.clock())
    return EventReceived(outcome=outcome.value)


@router.post(
    "/ses",
    summary="Receive an Amazon SES notification through SNS (signed)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
async def ses(request: Request, container: ContainerDep) -> EventReceived:
    body = await capped_body(request, container)
    outcome = await container.provider_events.ses(body, now=container.clock())
    return EventReceived(outcome=outcome.value)
