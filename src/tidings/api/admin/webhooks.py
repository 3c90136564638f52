"""Admin webhook endpoints (secret shown once, rotation) and their delivery log (replay)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, status
from pydantic import Field

from tidings.access.audit import webhook_url_entry
from tidings.api.deps import ContainerDep, KeyActor
from tidings.api.pagination import Cursor, Limit, Page, int_cursor, page_of
from tidings.api.schemas import RecordView, RequestBody

router = APIRouter(prefix="/webhooks", tags=["admin: webhooks"])
EndpointId = Annotated[int, Path(ge=1, le=2**62)]
DeliveryId = Annotated[int, Path(ge=1, le=2**62)]
INCLUDE_IMPORTS = (
    "Receive the events a CSV import causes (one per imported row). `false` keeps an "
    "endpoint that wants only live sign-ups quiet during a big import."
)
EventTypes = Annotated[list[Annotated[str, Field(max_length=100)]], Field(max_length=50)]


class EndpointCreate(RequestBody):
    url: str = Field(max_length=2000, description="Where to POST events (http or https).")
    event_types: EventTypes = Field(description='Event types to receive, or `["*"]` for all.')
    description: str = Field(default="", max_length=500)
    include_imports: bool = Field(default=True, description=INCLUDE_IMPORTS)


class EndpointUpdate(RequestBody):
    url: str | None = Field(default=None, max_length=2000)
    event_types: EventTypes | None = None
    description: str | None = Field(default=None, max_length=500)
    enabled: bool | None = None
    include_imports: bool | None = Field(default=None, description=INCLUDE_IMPORTS)


class EndpointPublic(RecordView):
    id: int
    url: str
    description: str
    event_types: list[str]
    enabled: bool
    disabled_reason: str | None
    include_imports: bool
    created_at: datetime
    updated_at: datetime


class EndpointWithSecret(EndpointPublic):
    secret: str = Field(description="The signing secret (`whsec_...`). Shown only this once.")


class DeliveryPublic(RecordView):
    id: int
    endpoint_id: int
    event_id: str
    event_type: str
    status: str
    attempts: int
    last_status_code: int | None
    last_error: str | None
    response_excerpt: str | None
    created_at: datetime
    delivered_at: datetime | None


@router.post("", status_code=status.HTTP_201_CREATED, summary="Create an endpoint")
async def create_endpoint(
    container: ContainerDep, actor: KeyActor, body: EndpointCreate
) -> EndpointWithSecret:
    row = await container.webhooks.create_endpoint(
        body.url, body.event_types, body.description, include_imports=body.include_imports
    )
    await container.audit.record_entry(actor, webhook_url_entry(row.id, row.url))
    return EndpointWithSecret.of(row)


@router.get("", summary="List endpoints")
async def list_endpoints(
    container: ContainerDep, limit: Limit = 100, cursor: Cursor = None
) -> Page[EndpointPublic]:
    rows = await container.webhooks.list_endpoints(after_id=int_cursor(cursor), limit=limit)
    return page_of(rows, limit, EndpointPublic.of, key=lambda row: row.id)


@router.get("/{endpoint_id}", summary="One endpoint")
async def get_endpoint(container: ContainerDep, endpoint_id: EndpointId) -> EndpointPublic:
    return EndpointPublic.of(await container.webhooks.get_endpoint(endpoint_id))


@router.patch("/{endpoint_id}", summary="Change URL, event types, description, or enable/disable")
async def update_endpoint(
    container: ContainerDep, actor: KeyActor, endpoint_id: EndpointId, body: EndpointUpdate
) -> EndpointPublic:
    before = await container.webhooks.get_endpoint(endpoint_id)
    row = await container.webhooks.update_endpoint(
        endpoint_id,
        url=body.url,
        event_types=body.event_types,
        description=body.description,
        enabled=body.enabled,
        include_imports=body.include_imports,
    )
    await container.audit.record_entry(actor, webhook_url_entry(row.id, row.url, before=before.url))
    return EndpointPublic.of(row)


@router.delete("/{endpoint_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete")
async def delete_endpoint(container: ContainerDep, endpoint_id: EndpointId) -> None:
    await container.webhooks.delete_endpoint(endpoint_id)


@router.post(
    "/{endpoint_id}/rotate-secret", summary="New secret; the old one signs too for a while"
)
async def rotate_secret(container: ContainerDep, endpoint_id: EndpointId) -> EndpointWithSecret:
    return EndpointWithSecret.of(await container.webhooks.rotate_secret(endpoint_id))


@router.post(
    "/{endpoint_id}/test",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Queue a `webhook.test` event to this endpoint",
)
async def send_test(container: ContainerDep, endpoint_id: EndpointId) -> DeliveryPublic:
    return DeliveryPublic.of(await container.webhooks.send_test(endpoint_id))


@router.get("/{endpoint_id}/deliveries", summary="The endpoint's delivery log, newest first")
async def list_deliveries(
    container: ContainerDep, endpoint_id: EndpointId, limit: Limit = 100, cursor: Cursor = None
) -> Page[DeliveryPublic]:
    rows = await container.webhooks.list_deliveries(
        endpoint_id, before_id=int_cursor(cursor), limit=limit
    )
    return page_of(rows, limit, DeliveryPublic.of, key=lambda row: row.id)


@router.post(
    "/deliveries/{delivery_id}/replay",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Send one delivery again (same webhook-id)",
)
async def replay_delivery(container: ContainerDep, delivery_id: DeliveryId) -> DeliveryPublic:
    return DeliveryPublic.of(await container.webhooks.replay_delivery(delivery_id))
