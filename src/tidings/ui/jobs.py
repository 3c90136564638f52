"""Jobs: those waiting for their time or running (a scheduled send is one), the next due
first, and the dead ones with their error, and replay."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from tidings.domain.jobs import JobStatus
from tidings.ui.guard import Session, container_of
from tidings.ui.templating import PAGE_SIZE, UiRoute, one_page, page

router = APIRouter(prefix="/jobs", route_class=UiRoute)
UPCOMING_SHOWN = 50


@router.get("")
async def dead_jobs(
    request: Request,
    session: Session,
    before: Annotated[int | None, Query(ge=1, le=2**62)] = None,
) -> HTMLResponse:
    queue = container_of(request).queue
    rows = await queue.list_jobs(status=JobStatus.DEAD, before_id=before, limit=PAGE_SIZE + 1)
    shown, next_before = one_page(rows, key=lambda job: job.id)
    waiting = await queue.upcoming(limit=UPCOMING_SHOWN + 1)
    return page(
        request,
        session,
        "jobs.html",
        jobs=shown,
        next_before=next_before,
        waiting=waiting[:UPCOMING_SHOWN],
        more_waiting=len(waiting) > UPCOMING_SHOWN,
    )


@router.post("/{job_id}/replay")
async def replay(
    request: Request, session: Session, job_id: Annotated[int, Path(ge=1, le=2**62)]
) -> Response:
    await container_of(request).queue.replay(job_id)
    return RedirectResponse("/admin/jobs", status_code=303)
