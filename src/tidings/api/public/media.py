"""The media library's files on the public site (CMP-6), fetched by readers' mail clients and
the archive. A file's name is the hash of its bytes, so it never changes: it is cached for a
year as immutable, served with its image type, never sniffed and never run as a page."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import FileResponse, Response

from tidings.api.deps import ContainerDep
from tidings.domain.errors import NotFound
from tidings.domain.media import media_type_of

router = APIRouter(tags=["public media"])
CACHE_CONTROL = "public, max-age=31536000, immutable"
# An image is never a document: nothing in it may run, load or be framed, whatever a browser
# would make of its bytes (the upload checks already refuse HTML or script in them).
IMAGE_POLICY = "default-src 'none'; sandbox"
StoredName = Annotated[str, Path(max_length=64, description="A stored file's name.")]


IMAGE_TYPES: dict[str, dict[str, object]] = {
    "image/png": {},
    "image/jpeg": {},
    "image/gif": {},
    "image/webp": {},
}


@router.get(
    "/media/{name}",
    summary="An image of the media library",
    response_class=Response,
    responses={200: {"content": IMAGE_TYPES, "description": "The image."}},
)
async def media_file(container: ContainerDep, name: StoredName) -> Response:
    path = container.media.store.path_of(name)
    if path is None:
        raise NotFound("no image by that name")
    return FileResponse(
        path,
        media_type=media_type_of(name),
        headers={
            "Cache-Control": CACHE_CONTROL,
            "Content-Security-Policy": IMAGE_POLICY,
            "X-Content-Type-Options": "nosniff",
            "Cross-Origin-Resource-Policy": "cross-origin",
        },
        content_disposition_type="inline",
    )
