"""Subscribers: search (newsletter, state, tier, label and free text), a person's page with
consent history and deliveries, suppress, privacy export and delete, CSV import and export."""

from __future__ import annotations

import io
import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, File, Form, Path, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from tidings.access.audit import export_entry
from tidings.audience.bulk import Selection
from tidings.domain.consent import SubscriptionState
from tidings.domain.errors import InvalidInput, NotFound
from tidings.ui.guard import OperatorActor, Session, container_of
from tidings.ui.imports import CONSENT_CHOICES, ImportRuns
from tidings.ui.subscriber_edits import ACTION_WORDS
from tidings.ui.templating import PAGE_SIZE, UiRoute, one_page, page

router = APIRouter(prefix="/subscribers", route_class=UiRoute)
SubscriberId = Annotated[int, Path(ge=1, le=2**62)]


def _runs(request: Request) -> ImportRuns:
    state = request.app.state
    if not hasattr(state, "ui_imports"):
        state.ui_imports = ImportRuns()
    runs: ImportRuns = state.ui_imports
    return runs


class AudienceQuery:
    """The AUD-11 filter as query parameters: newsletter, state, tier and label (blank: any)."""

    def __init__(
        self,
        newsletter: Annotated[str, Query(max_length=64)] = "",
        state: Annotated[str, Query(max_length=16)] = "",
        tier: Annotated[str, Query(max_length=16)] = "",
        label: Annotated[str, Query(max_length=64)] = "",
    ) -> None:
        if state and state not in {s.value for s in SubscriptionState}:
            raise InvalidInput("state must be pending, confirmed or unsubscribed", field="state")
        self.newsletter = newsletter
        self.state = state
        self.tier = tier
        self.label = label

    def used(self) -> dict[str, str | None]:
        """The filter for the use cases: blank fields left out."""
        return {
            "newsletter": self.newsletter or None,
            "state": self.state or None,
            "tier": self.tier or None,
            "label": self.label or None,
        }


Audience = Annotated[AudienceQuery, Depends()]


@router.get("")
async def search(
    request: Request,
    session: Session,
    audience: Audience,
    q: Annotated[str, Query(max_length=320)] = "",
    after: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    done: Annotated[str, Query(max_length=16)] = "",
    changed: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> HTMLResponse:
    container = container_of(request)
    error = None
    found: list[Any] = []
    total = 0
    filters = audience.used()
    state = filters.pop("state")
    try:
        found = await container.subscribers.search(
            **filters,
            state=SubscriptionState(state) if state else None,
            text=q.strip() or None,
            after_id=after,
            limit=PAGE_SIZE + 1,
        )
        total = await container.bulk.count(
            Selection(
                newsletter=filters["newsletter"],
                state=SubscriptionState(state) if state else None,
                tier=filters["tier"],
                label=filters["label"],
                text=q.strip() or None,
            )
        )
    except (InvalidInput, NotFound) as refused:
        error = refused.detail
    shown, next_after = one_page(found, key=lambda view: int(view.subscriber.id))
    query = {**vars(audience), "q": q}
    return page(
        request,
        session,
        "subscribers.html",
        status_code=422 if error else 200,
        error=error,
        found=shown,
        total=total,
        done=done,
        changed=changed,
        actions=list(ACTION_WORDS.items()),
        next_after=next_after,
        query=query,
        newsletters=await container.newsletters.list(),
        states=[s.value for s in SubscriptionState],
    )


@router.get("/export")
async def export_csv(
    request: Request, session: Session, actor: OperatorActor, audience: Audience
) -> Response:
    container = container_of(request)
    out = io.StringIO()
    rows = await container.importer.export_csv(out, **audience.used())
    await container.audit.record_entry(actor, export_entry(rows, **audience.used()))
    return Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": 'attachment; filename="subscribers.csv"',
            "Cache-Control": "no-store",
        },
    )


@router.get("/import")
async def import_form(request: Request, session: Session) -> HTMLResponse:
    newsletters = await container_of(request).newsletters.list()
    return page(request, session, "import_form.html", newsletters=newsletters, error=None)


@router.post("/import")
async def start_import(
    request: Request,
    session: Session,
    newsletter: Annotated[str, Form(max_length=64)],
    file: Annotated[UploadFile, File()],
    consent: Annotated[str, Form(max_length=16)] = "wait",
) -> Response:
    container = container_of(request)
    try:
        text = (await file.read()).decode("utf-8-sig")
    except UnicodeDecodeError:
        return page(
            request,
            session,
            "import_form.html",
            status_code=422,
            newsletters=await container.newsletters.list(),
            error="The file must be UTF-8 CSV.",
        )
    if consent not in CONSENT_CHOICES:
        raise InvalidInput("choose what happens to the rows that wait", field="consent")
    run_id = _runs(request).start(
        container.importer,
        container.pending_confirmations,
        text,
        newsletter=newsletter,
        actor=f"ui:{session.admin_id}",
        consent=consent,
    )
    return RedirectResponse(f"/admin/subscribers/import/{run_id}", status_code=303)


def _import_run(request: Request, run_id: str) -> Any:
    run = _runs(request).get(run_id)
    if run is None:
        raise NotFound("no such import in this process (it may have restarted); import again")
    return run


@router.get("/import/{run_id}")
async def import_status(
    request: Request, session: Session, run_id: Annotated[str, Path(max_length=40)]
) -> HTMLResponse:
    run = _import_run(request, run_id)
    return page(request, session, "import_status.html", run=run, run_id=run_id)


@router.get("/import/{run_id}/progress")
async def import_progress(
    request: Request, session: Session, run_id: Annotated[str, Path(max_length=40)]
) -> JSONResponse:
    run = _import_run(request, run_id)
    return JSONResponse(
        {
            "done": run.done,
            "completed": run.rows_read,
            "total": run.total_rows,
            "labels": {"rows": f"{run.rows_read} of about {run.total_rows} rows read"},
        },
        headers={"Cache-Control": "no-store"},
    )


@router.post("/{subscriber_id}/suppress")
async def suppress(
    request: Request,
    session: Session,
    subscriber_id: SubscriberId,
    note: Annotated[str, Form(max_length=500)] = "",
) -> Response:
    container = container_of(request)
    view = await container.subscribers.get(subscriber_id)
    await container.suppressions.suppress(
        view.subscriber.email, reason="admin", note=note or None, actor=f"ui:{session.admin_id}"
    )
    return RedirectResponse(f"/admin/subscribers/{subscriber_id}", status_code=303)


@router.get("/{subscriber_id}/export")
async def privacy_export(
    request: Request, session: Session, subscriber_id: SubscriberId
) -> Response:
    data = await container_of(request).subscribers.export(subscriber_id)
    return Response(
        json.dumps(data, indent=2, default=str),
        media_type="application/json",
        headers={
            "Content-Disposition": f'attachment; filename="subscriber-{subscriber_id}.json"',
            "Cache-Control": "no-store",
        },
    )


@router.get("/{subscriber_id}/delete")
async def confirm_delete(
    request: Request, session: Session, subscriber_id: SubscriberId
) -> HTMLResponse:
    view = await container_of(request).subscribers.get(subscriber_id)
    return page(request, session, "person_delete.html", view=view)


@router.post("/{subscriber_id}/delete")
async def delete(
    request: Request,
    session: Session,
    subscriber_id: SubscriberId,
    confirm_email: Annotated[str, Form(max_length=320)] = "",
) -> Response:
    container = container_of(request)
    view = await container.subscribers.get(subscriber_id)
    if confirm_email.strip().lower() != view.subscriber.email.lower():
        return page(
            request,
            session,
            "person_delete.html",
            status_code=422,
            view=view,
            error="Type the subscriber's address exactly to confirm.",
        )
    await container.subscribers.delete(subscriber_id)
    return RedirectResponse("/admin/subscribers?deleted=1", status_code=303)
