"""Inbound: reports by mail that nothing authenticated (PRV-6), waiting for the operator to
apply or discard them, and the received events kept for reading."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from tidings.ui.guard import OperatorActor, Session, container_of
from tidings.ui.templating import PAGE_SIZE, UiRoute, one_page, page

router = APIRouter(prefix="/events", route_class=UiRoute)
EventId = Annotated[int, Path(ge=1, le=2**62)]


@router.get("")
async def inbound_events(
    request: Request,
    session: Session,
    reviewed: Annotated[bool, Query(description="Show the reviewed ones too")] = False,
    before: Annotated[int | None, Query(ge=1, le=2**62)] = None,
) -> HTMLResponse:
    rows = await container_of(request).feedback.events(
        status="unverified", after_id=before, limit=PAGE_SIZE + 1, awaiting_review=not reviewed
    )
    shown, next_before = one_page(rows, key=lambda row: row.id)
    return page(
        request, session, "inbound.html", reports=shown, next_before=next_before, reviewed=reviewed
    )


@router.post("/{event_id}/apply")
async def apply_report(
    request: Request, session: Session, actor: OperatorActor, event_id: EventId
) -> Response:
    await container_of(request).inbound_mail.review(event_id, apply=True, actor=actor.label)
    return RedirectResponse("/admin/events", status_code=303)


@router.post("/{event_id}/discard")
async def discard_report(
    request: Request, session: Session, actor: OperatorActor, event_id: EventId
) -> Response:
    await container_of(request).inbound_mail.review(event_id, apply=False, actor=actor.label)
    return RedirectResponse("/admin/events", status_code=303)
