"""Provider event webhooks (PRV-6): Mailgun posts delivery, bounce and complaint events here.

Not behind an API key: the provider proves itself with the body's signature. 2xx only once
the event is durably recorded; a forged, stale or replayed signature gets 401/409 and changes
nothing (docs/deliverability.md).

These routes take a campaign's aftermath, a million deliveries within the hour, so they are
served by `ProviderEventsFirst`, ahead of the stack every other route goes through (request
context, audit trail, site hardening, routing, dependency solving, response models): it reads
the body under the size cap, hands it to `ProviderEvents`, answers from bytes encoded once,
renders errors as the rest of the API does (problem+json), and counts and logs the request
as `RequestContext` does. Measured, it halves the API's CPU per request (issue 22,
docs/performance.md). The routes below document the two endpoints in the OpenAPI document and
serve them when the router is mounted without it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Receive, Scope, Send

from tidings.api.errors import tidings_problem
from tidings.api.middleware import count_request
from tidings.audience.hearing.recording import Outcome
from tidings.bootstrap import Container
from tidings.domain.errors import TidingsError

PREFIX = "/api/events"
router = APIRouter(prefix=PREFIX, tags=["provider events"])
Intake = Callable[[bytes], Awaitable[Outcome]]


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


def _intake(container: Container, provider: str) -> Intake:
    """`ProviderEvents.mailgun` or `.ses`, at the container's clock."""

    async def receive(body: bytes) -> Outcome:
        now: datetime = container.clock()
        events = container.provider_events
        return await (events.mailgun if provider == "mailgun" else events.ses)(body, now=now)

    return receive


class ProviderEventsFirst:
    """Serve `POST /api/events/{mailgun,ses}` before the rest of the app (see the module)."""

    def __init__(self, app: ASGIApp, container: Container) -> None:
        self.app = app
        self._container = container
        self._routes = {
            f"{PREFIX}/{provider}": _intake(container, provider) for provider in ("mailgun", "ses")
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        intake = self._routes.get(scope["path"]) if scope["type"] == "http" else None
        if intake is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = uuid.uuid4().hex.encode()
        try:
            body = await _capped_body(receive, self._container)
            if body is None:
                return  # the provider hung up before sending it all: nothing to answer
            answer = ANSWERS[await intake(body)]
        except TidingsError as exc:
            problem = tidings_problem(exc)
            problem.headers["x-request-id"] = request_id.decode()
            await problem(scope, receive, send)
            status = problem.status_code
        except Exception:  # answered 500 by the app's last-resort handler, outside this
            count_request(self._container.metrics, "POST", scope["path"], 500, started)
            raise
        else:
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(answer)).encode()),
                (b"x-request-id", request_id),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": answer})
            status = 200
        count_request(self._container.metrics, "POST", scope["path"], status, started)


async def _capped_body(receive: Receive, container: Container) -> bytes | None:
    """The request body, refused (413) as soon as it passes `inbound.max_event_bytes`; None
    if the client disconnected first."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        container.provider_events.check_size(len(body))
        if not message.get("more_body", False):
            return bytes(body)


async def _served(request: Request, provider: str) -> Response:
    container: Container = request.app.state.container
    body = await _capped_body(request.receive, container)
    outcome = await _intake(container, provider)(body or b"")
    return Response(ANSWERS[outcome], media_type="application/json")


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
    return await _served(request, "mailgun")


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
    return await _served(request, "ses")
