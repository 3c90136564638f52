"""Provider event webhooks (PRV-6): Mailgun posts delivery, bounce and complaint events here.

Not behind an API key: the provider proves itself with the body's signature. 2xx only once
the event is durably recorded; a forged, stale or replayed signature gets 401/409 and changes
nothing (docs/deliverability.md).

These routes take a campaign's aftermath, a million deliveries within the hour, so they skip
what FastAPI does per request that they do not need (issue 22, docs/performance.md): no
dependencies to solve, and the answer is encoded once here rather than validated against a
response model (`EventReceived` documents it).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from tidings.audience.feedback import Outcome
from tidings.bootstrap import Container

router = APIRouter(prefix="/api/events", tags=["provider events"])


class EventReceived(BaseModel):
    outcome: str = Field(
        description="applied, unmatched (no such subscriber), ignored (a kind tidings does "
        "not act on), duplicate (heard before), unparsed (kept for the operator) or confirmed "
        "(an SNS subscription)"
    )


# The answer for each outcome, encoded once (`{"outcome": "applied"}`).
ANSWERS = {
    outcome: EventReceived(outcome=outcome.value).model_dump_json().encode() for outcome in Outcome
}
DOCUMENTED: dict[int | str, dict[str, Any]] = {
    200: {"model": EventReceived, "description": "Recorded (or heard before)"}
}


def answer(outcome: Outcome) -> Response:
    return Response(ANSWERS[outcome], media_type="application/json")


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
    response_class=Response,
    responses=DOCUMENTED,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
)
async def mailgun(request: Request) -> Response:
    container: Container = request.app.state.container
    body = await capped_body(request, container)
    return answer(await container.provider_events.mailgun(body, now=container.clock()))


@router.post(
    "/ses",
    summary="Receive an Amazon SES notification through SNS (signed)",
    response_class=Response,
    responses=DOCUMENTED,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
async def ses(request: Request) -> Response:
    container: Container = request.app.state.container
    body = await capped_body(request, container)
    return answer(await container.provider_events.ses(body, now=container.clock()))
