"""Webhooks: endpoints (the signing secret shown once, at creation), each endpoint's delivery
log with status and response code, test events and replay."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from tidings.access.audit import webhook_url_entry
from tidings.domain.errors import InvalidInput
from tidings.domain.webhook_events import WEBHOOK_EVENT_TYPES
from tidings.ui.guard import OperatorActor, Session, container_of
from tidings.ui.templating import PAGE_SIZE, UiRoute, one_page, page

router = APIRouter(prefix="/webhooks", route_class=UiRoute)
RowId = Annotated[int, Path(ge=1, le=2**62)]


async def _endpoints_page(
    request: Request,
    session: Session,
    *,
    error: str | None = None,
    created_secret: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    endpoints = await container_of(request).webhooks.list_endpoints(after_id=None, limit=200)
    return page(
        request,
        session,
        "webhooks.html",
        status_code=status_code,
        endpoints=endpoints,
        event_types=sorted(WEBHOOK_EVENT_TYPES),
        error=error,
        created_secret=created_secret,
    )


@router.get("")
async def endpoints(request: Request, session: Session) -> HTMLResponse:
    return await _endpoints_page(request, session)


@router.post("")
async def create_endpoint(
    request: Request,
    session: Session,
    actor: OperatorActor,
    url: Annotated[str, Form(max_length=2000)],
    event_types: Annotated[list[str], Form(max_length=50)],
    description: Annotated[str, Form(max_length=500)] = "",
) -> Response:
    container = container_of(request)
    try:
        created = await container.webhooks.create_endpoint(url, event_types, description)
    except InvalidInput as refused:
        return await _endpoints_page(request, session, error=refused.detail, status_code=422)
    await container.audit.record_entry(actor, webhook_url_entry(created.id, created.url))
    # The only time the secret is shown: the page is not cached and not shown again.
    return await _endpoints_page(request, session, created_secret=created.secret)


@router.get("/{endpoint_id}")
async def deliveries(
    request: Request,
    session: Session,
    endpoint_id: RowId,
    before: Annotated[int | None, Query(ge=1, le=2**62)] = None,
) -> HTMLResponse:
    container = container_of(request)
    endpoint = await container.webhooks.get_endpoint(endpoint_id)
    rows = await container.webhooks.list_deliveries(
        endpoint_id, before_id=before, limit=PAGE_SIZE + 1
    )
    shown, next_before = one_page(rows, key=lambda delivery: delivery.id)
    return page(
        request,
        session,
        "webhook_deliveries.html",
        endpoint=endpoint,
        deliveries=shown,
        next_before=next_before,
    )


@router.post("/{endpoint_id}/test")
async def send_test(request: Request, session: Session, endpoint_id: RowId) -> Response:
    await container_of(request).webhooks.send_test(endpoint_id)
    return RedirectResponse(f"/admin/webhooks/{endpoint_id}", status_code=303)


@router.post("/deliveries/{delivery_id}/replay")
async def replay(request: Request, session: Session, delivery_id: RowId) -> Response:
    delivery = await container_of(request).webhooks.replay_delivery(delivery_id)
    return RedirectResponse(f"/admin/webhooks/{delivery.endpoint_id}", status_code=303)
