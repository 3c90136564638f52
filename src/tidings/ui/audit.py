"""The audit log page, for the owner: who did what, when, from where, newest first, filtered by
action (a prefix: `admin.` finds every operator change) and by actor."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from tidings.ui.guard import Session, container_of
from tidings.ui.templating import PAGE_SIZE, UiRoute, one_page, page

router = APIRouter(prefix="/audit", route_class=UiRoute)


@router.get("")
async def audit_log(
    request: Request,
    session: Session,
    action: Annotated[str, Query(max_length=64)] = "",
    actor: Annotated[str, Query(max_length=100)] = "",
    before: Annotated[int | None, Query(ge=1, le=2**62)] = None,
) -> HTMLResponse:
    rows = await container_of(request).audit.list(
        action=action.strip() or None,
        actor=actor.strip() or None,
        before_id=before,
        limit=PAGE_SIZE + 1,
    )
    shown, next_before = one_page(rows, key=lambda entry: entry.id)
    return page(
        request,
        session,
        "audit.html",
        entries=shown,
        next_before=next_before,
        action=action,
        actor=actor,
    )
