"""Admin media library (CMP-6): upload an image (multipart `file` and `alt`), list and search
the library, see where an image is used, delete it."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, File, Form, Path, Query, Response, UploadFile, status
from pydantic import BaseModel, Field

from tidings.api.deps import ContainerDep, KeyActor
from tidings.api.pagination import Limit, Page, encode_cursor, int_cursor
from tidings.bootstrap import Container
from tidings.campaigns.media import MediaRow
from tidings.domain.media import MAX_ALT_LENGTH, Usage

router = APIRouter(prefix="/media", tags=["admin: media"])
MediaId = Annotated[int, Path(ge=1, le=2**62)]
UPLOAD_BODY = {
    "multipart/form-data": {
        "schema": {
            "type": "object",
            "required": ["file", "alt"],
            "properties": {
                "file": {"type": "string", "format": "binary"},
                "alt": {"type": "string", "maxLength": MAX_ALT_LENGTH},
            },
        }
    }
}


class MediaPublic(BaseModel):
    id: int
    filename: str = Field(description="The uploaded file's own name (never a stored name).")
    alt: str
    format: str = Field(description="png, jpeg, gif or webp.")
    original_width: int
    original_height: int
    frames: int = Field(description="More than 1: an animation, kept animated.")
    width_1x: int
    height_1x: int
    bytes_1x: int
    width_2x: int
    height_2x: int
    bytes_2x: int
    created_at: datetime
    url: str = Field(description="The file at the layout's width, on the public site.")
    url_2x: str = Field(description="Twice the layout's width (the same file when not wider).")
    markdown: str = Field(description="What the editor inserts into a Markdown body.")
    html: str = Field(description="What the editor inserts into an HTML body.")


class UsagePublic(BaseModel):
    kind: str = Field(description="campaign or newsletter (its welcome email).")
    id: int
    title: str


def _public(container: Container, row: MediaRow) -> MediaPublic:
    shown = container.media.shown(row)
    fields = {name: getattr(row, name) for name in MediaPublic.model_fields if hasattr(row, name)}
    return MediaPublic(
        **fields, url=shown.url, url_2x=shown.url_2x, markdown=shown.markdown, html=shown.html
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Upload an image (201; 200 when the same file is already in the library)",
    openapi_extra={"requestBody": {"content": UPLOAD_BODY, "required": True}},
    responses={200: {"model": MediaPublic, "description": "Already in the library: that image."}},
)
async def upload(
    container: ContainerDep,
    actor: KeyActor,
    response: Response,
    file: Annotated[UploadFile, File(description="PNG, JPEG, GIF or WebP.")],
    alt: Annotated[str, Form(max_length=MAX_ALT_LENGTH)],
) -> MediaPublic:
    """Re-encoded (metadata gone, orientation applied) at the email layout's width and twice
    it. Refused with the reason (422, or 413 over `media.max_upload_bytes`), nothing stored."""
    added = await container.media.add(file.read, filename=file.filename or "", alt=alt, actor=actor)
    if not added.created:
        response.status_code = status.HTTP_200_OK
    return _public(container, added.media)


@router.get("", summary="List and search the library (newest first)")
async def list_media(
    container: ContainerDep,
    q: Annotated[str | None, Query(max_length=200, description="In file name or alt text.")] = None,
    limit: Limit = 50,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> Page[MediaPublic]:
    rows = await container.media.search(search=q, before_id=int_cursor(cursor), limit=limit)
    next_cursor = encode_cursor(rows[-1].id) if rows and len(rows) == limit else None
    return Page(items=[_public(container, row) for row in rows], next_cursor=next_cursor)


@router.get("/{media_id}", summary="One image")
async def get_media(container: ContainerDep, media_id: MediaId) -> MediaPublic:
    return _public(container, await container.media.get(media_id))


@router.get("/{media_id}/usages", summary="The campaigns and welcome emails that show it")
async def usages(container: ContainerDep, media_id: MediaId) -> list[UsagePublic]:
    return [_usage(usage) for usage in await container.media.usages(media_id)]


def _usage(usage: Usage) -> UsagePublic:
    return UsagePublic(kind=usage.kind, id=usage.id, title=usage.title)


@router.delete(
    "/{media_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete an image and its files (409 while it is used, unless force)",
)
async def delete_media(
    container: ContainerDep,
    actor: KeyActor,
    media_id: MediaId,
    force: Annotated[
        bool, Query(description="Delete even though content links to it (it shows broken).")
    ] = False,
) -> None:
    await container.media.delete(media_id, actor=actor, force=force)
