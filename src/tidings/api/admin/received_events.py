"""The generic event form (PRV-6) for providers and bridges tidings has no webhook for, and
the operator's view of received events (unparsed ones included)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from tidings.api.deps import ContainerDep, KeyActor
from tidings.api.pagination import Cursor, Limit, Page, int_cursor, page_of
from tidings.api.schemas import AwareDateTime, RecordView, RequestBody
from tidings.audience.hearing.intake import GENERIC_KINDS, MAX_GENERIC_EVENTS, GenericEvent

router = APIRouter(prefix="/events", tags=["admin: events"])


class EventIn(RequestBody):
    id: str = Field(min_length=1, max_length=255, description="The provider's event id (dedupe).")
    type: str = Field(max_length=16, description=" | ".join(GENERIC_KINDS))
    email: str = Field(max_length=320, description="The recipient address the event is about.")
    occurred_at: AwareDateTime
    message_id: str | None = Field(
        default=None, max_length=998, description="The Message-ID tidings gave the message."
    )
    code: str | None = Field(default=None, max_length=32, description="e.g. 550 or 5.1.1")
    diagnostic: str | None = Field(default=None, max_length=1000)


class EventBatch(RequestBody):
    events: list[EventIn] = Field(max_length=MAX_GENERIC_EVENTS)


class EventOutcomes(BaseModel):
    outcomes: list[str]


class InboundEventPublic(RecordView):
    id: int
    source: str
    event_key: str
    kind: str | None
    status: str
    campaign_id: int | None
    occurred_at: datetime | None
    code: str | None
    diagnostic: str | None
    payload: str | None
    received_at: datetime
    reviewed: str | None = Field(description="unverified reports: applied or discarded")
    reviewed_at: datetime | None
    reviewed_by: str | None


class ReviewOutcome(BaseModel):
    outcomes: list[str] = Field(
        description="What applying did, per event the report claims (empty when discarded)"
    )


@router.post("", summary="Report delivery events in the generic form")
async def report(container: ContainerDep, body: EventBatch) -> EventOutcomes:
    events = [GenericEvent(**event.model_dump()) for event in body.events]
    outcomes = await container.provider_events.generic(events)
    return EventOutcomes(outcomes=[outcome.value for outcome in outcomes])


@router.get("", summary="List received events, newest first")
async def list_events(
    container: ContainerDep,
    status: Annotated[str | None, Query(max_length=16)] = None,
    awaiting_review: Annotated[
        bool, Query(description="Only unverified reports nobody has applied or discarded")
    ] = False,
    limit: Limit = 100,
    cursor: Cursor = None,
) -> Page[InboundEventPublic]:
    rows = await container.feedback.events(
        status=status, after_id=int_cursor(cursor), limit=limit, awaiting_review=awaiting_review
    )
    return page_of(rows, limit, InboundEventPublic.of, key=lambda row: row.id)


@router.post("/{event_id}/apply", summary="Act on an unverified report (PRV-6)")
async def apply_report(container: ContainerDep, actor: KeyActor, event_id: int) -> ReviewOutcome:
    """Carry out what an unverified bounce or complaint by mail claims, by the addresses it
    names: only when you know it is genuine (nothing authenticated it). Audited."""
    outcomes = await container.inbound_mail.review(event_id, apply=True, actor=actor.label)
    return ReviewOutcome(outcomes=[outcome.value for outcome in outcomes])


@router.post("/{event_id}/discard", summary="Discard an unverified report (PRV-6)")
async def discard_report(container: ContainerDep, actor: KeyActor, event_id: int) -> ReviewOutcome:
    """Mark an unverified report as reviewed and not acted on. Audited."""
    await container.inbound_mail.review(event_id, apply=False, actor=actor.label)
    return ReviewOutcome(outcomes=[])
