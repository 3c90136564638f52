"""The Media page (CMP-6): upload an image with its alt text, search the library, delete an
image (a used one only after a page that says where it is used). The editor's image panel
uploads here too, and reads the answer as JSON."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Path, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from tidings.bootstrap import Container
from tidings.campaigns.media import MediaRow
from tidings.domain.errors import TidingsError
from tidings.domain.media import ACCEPTED, MAX_ALT_LENGTH, MediaInUse
from tidings.error_status import status_for
from tidings.ui.guard import OperatorActor, Session, container_of
from tidings.ui.templating import PAGE_SIZE, UiRoute, one_page, page

router = APIRouter(prefix="/media", route_class=UiRoute)
MediaId = Annotated[int, Path(ge=1, le=2**62)]
ACCEPT = "image/png,image/jpeg,image/gif,image/webp"


def media_item(container: Container, row: MediaRow) -> dict[str, Any]:
    """What a page (the library, the editor's image panel) shows of one image."""
    return container.media.described(row)


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


async def _library(
    request: Request,
    session: Session,
    *,
    q: str = "",
    before: int | None = None,
    error: TidingsError | None = None,
    notice: str | None = None,
    typed_alt: str = "",
) -> HTMLResponse:
    container = container_of(request)
    rows = await container.media.search(search=q, before_id=before, limit=PAGE_SIZE + 1)
    shown, next_before = one_page(rows, key=lambda row: row.id)
    return page(
        request,
        session,
        "media.html",
        status_code=status_for(error) if error else 200,
        items=[media_item(container, row) for row in shown],
        next_before=next_before,
        q=q,
        error=error.detail if error else None,
        error_field=(error.field or "") if error else "",
        notice=notice,
        typed_alt=typed_alt,
        accept=ACCEPT,
        accepted=ACCEPTED,
        max_bytes=container.media.max_bytes,
        max_alt=MAX_ALT_LENGTH,
        content_width=container.media.width,
    )


@router.get("")
async def library(
    request: Request,
    session: Session,
    q: Annotated[str, Query(max_length=200)] = "",
    before: Annotated[int | None, Query(ge=1, le=2**62)] = None,
    added: Annotated[int | None, Query(ge=1, le=2**62)] = None,
    deleted: Annotated[int | None, Query(ge=1, le=2**62)] = None,
) -> HTMLResponse:
    notice = None
    if added is not None:
        notice = f"Image {added} is in the library."
    elif deleted is not None:
        notice = f"Image {deleted} was deleted."
    return await _library(request, session, q=q, before=before, notice=notice)


@router.post("")
async def upload(
    request: Request,
    session: Session,
    actor: OperatorActor,
    file: Annotated[UploadFile, File()],
    alt: Annotated[str, Form(max_length=MAX_ALT_LENGTH)] = "",
) -> Response:
    container = container_of(request)
    try:
        added = await container.media.add(
            file.read, filename=file.filename or "", alt=alt, actor=actor
        )
    except TidingsError as refused:
        if _wants_json(request):
            answer = {"error": refused.detail, "field": refused.field}
            return JSONResponse(answer, status_code=status_for(refused))
        return await _library(request, session, error=refused, typed_alt=alt)
    if _wants_json(request):
        item = media_item(container, added.media)
        return JSONResponse(
            {**item, "created_at": item["created_at"].isoformat(), "created": added.created}
        )
    return RedirectResponse(f"/admin/media?added={added.media.id}", status_code=303)


@router.post("/{media_id}/delete")
async def delete(
    request: Request,
    session: Session,
    actor: OperatorActor,
    media_id: MediaId,
    force: Annotated[str, Form(max_length=8)] = "",
) -> Response:
    container = container_of(request)
    try:
        await container.media.delete(media_id, actor=actor, force=force == "yes")
    except MediaInUse:
        item = media_item(container, await container.media.get(media_id))
        usages = await container.media.usages(media_id)
        return page(
            request, session, "media_delete.html", status_code=409, item=item, usages=usages
        )
    return RedirectResponse(f"/admin/media?deleted={media_id}", status_code=303)
