"""The media library (CMP-6): upload an image (checked, re-encoded, stored once however often
it is uploaded), list and search the library, and delete an image — refused while content
links to it, unless forced. Every upload and deletion is audited."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tidings.domain.audit import Actor
from tidings.domain.errors import NotFound
from tidings.domain.media import (
    Insertion,
    MediaInUse,
    MediaRefused,
    MediaTooLarge,
    Usage,
    clean_alt,
    clean_filename,
    insertion,
    stored_name,
)
from tidings.observability.logging import get_logger
from tidings.rendering.theme import CONTENT_WIDTH
from tidings.storage import media as queries
from tidings.storage.database import Database
from tidings.storage.media import AlreadyStored, MediaRow

__all__ = ["Added", "MediaLibrary", "MediaRow", "read_limited"]
from tidings.storage.media_files import LocalMediaStore

log = get_logger(__name__)
CHUNK_BYTES = 65_536
# What reading an upload takes: a number of bytes wanted, and the bytes (b"" at the end).
ReadChunk = Callable[[int], Awaitable[bytes]]
RecordAudit = Callable[[Actor, str, str | None, dict[str, Any] | None], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Added:
    media: MediaRow
    created: bool  # False: the same bytes were already in the library


async def read_limited(read: ReadChunk, max_bytes: int) -> bytes:
    """The whole upload, read chunk by chunk; reading stops as soon as it passes
    `max_bytes`, so an oversized upload is never held whole."""
    chunks: list[bytes] = []
    total = 0
    while chunk := await read(CHUNK_BYTES):
        total += len(chunk)
        if total > max_bytes:
            raise MediaTooLarge(
                f"the file is larger than {max_bytes:,} bytes (media.max_upload_bytes)",
                field="file",
            )
        chunks.append(chunk)
    return b"".join(chunks)


class MediaLibrary:
    def __init__(
        self,
        db: Database,
        store: LocalMediaStore,
        now: Callable[[], datetime],
        record: RecordAudit,
        *,
        public_url: str,
        max_bytes: int,
        max_pixels: int,
        width: int = CONTENT_WIDTH,
    ) -> None:
        self._db = db
        self.store = store
        self._now = now
        self._record = record
        self._public_url = public_url.rstrip("/")
        self.max_bytes = max_bytes
        self.max_pixels = max_pixels
        self.width = width

    def url(self, name: str) -> str:
        """Where readers' mail clients fetch a stored file (`/media/{name}`)."""
        return f"{self._public_url}/media/{name}"

    def described(self, row: MediaRow) -> dict[str, Any]:
        """One image as the admin page, the editor's image panel and `tidings media --json`
        show it: its own facts, its size in mail, `path` on this site and `url` for readers."""
        shown = self.shown(row)
        return {
            "id": row.id,
            "filename": row.filename,
            "alt": row.alt,
            "format": row.format,
            "frames": row.frames,
            "width": row.width_1x,
            "height": row.height_1x,
            "original_width": row.original_width,
            "original_height": row.original_height,
            "bytes": row.bytes_1x,
            "created_at": row.created_at,
            "path": f"/media/{row.file_1x}",
            "url": shown.url,
            "url_2x": shown.url_2x,
            "markdown": shown.markdown,
            "html": shown.html,
        }

    def shown(self, row: MediaRow) -> Insertion:
        """The image's public addresses and what inserting it into content writes."""
        return insertion(
            row.alt, self.url(row.file_1x), self.url(row.file_2x), row.width_1x, row.height_1x
        )

    async def add(self, read: ReadChunk, *, filename: str, alt: str, actor: Actor) -> Added:
        """Check, re-encode and store one upload, or raise `MediaRefused`/`MediaTooLarge`
        with nothing stored."""
        shown_name = clean_filename(filename)
        alt_text = clean_alt(alt)
        data = await read_limited(read, self.max_bytes)
        if not data:
            raise MediaRefused("the file is empty", field="file")
        source_sha256 = hashlib.sha256(data).hexdigest()
        async with self._db.read() as conn:
            existing = await queries.media_by_source(conn, source_sha256)
        if existing is not None:
            return Added(existing, created=False)
        # Pillow is loaded by the first upload, not by every process that builds the root.
        from tidings.rendering.images import prepare_image

        prepared = await asyncio.to_thread(
            prepare_image, data, max_pixels=self.max_pixels, width=self.width
        )
        variants = {
            size: (stored_name(encoded.data, prepared.format), encoded)
            for size, encoded in (("1x", prepared.one_x), ("2x", prepared.two_x))
        }
        names = frozenset(name for name, _ in variants.values())
        try:
            for name, encoded in variants.values():
                await self.store.put(name, encoded.data)
            async with self._db.write() as conn:
                row = await queries.insert_media(
                    conn,
                    source_sha256=source_sha256,
                    filename=shown_name,
                    alt=alt_text,
                    format=prepared.format,
                    original_width=prepared.original_width,
                    original_height=prepared.original_height,
                    frames=prepared.frames,
                    created_at=self._now(),
                    created_by=actor.label,
                    **{
                        field: value
                        for size, (name, encoded) in variants.items()
                        for field, value in (
                            (f"file_{size}", name),
                            (f"width_{size}", encoded.width),
                            (f"height_{size}", encoded.height),
                            (f"bytes_{size}", len(encoded.data)),
                        )
                    },
                )
        except AlreadyStored:
            await self._remove_unheld(names)
            async with self._db.read() as conn:
                raced = await queries.media_by_source(conn, source_sha256)
            assert raced is not None
            return Added(raced, created=False)
        except BaseException:
            await self._remove_unheld(names)
            raise
        detail = {"format": row.format, "width": row.original_width, "frames": row.frames}
        await self._record(actor, "media.uploaded", f"media:{row.id}", detail)
        log.info("media.uploaded", media_id=row.id, format=row.format, bytes=len(data))
        return Added(row, created=True)

    async def _remove_unheld(self, names: frozenset[str]) -> None:
        """Delete those of `names` no media row holds (after a failed or undone write)."""
        async with self._db.read() as conn:
            held = await queries.files_in_use(conn, names)
        for name in names - held:
            await self.store.delete(name)

    async def get(self, media_id: int) -> MediaRow:
        async with self._db.read() as conn:
            row = await queries.get_media(conn, media_id)
        if row is None:
            raise NotFound(f"no image with id {media_id}")
        return row

    async def search(
        self, *, search: str | None = None, before_id: int | None = None, limit: int = 50
    ) -> list[MediaRow]:
        """Newest first; `search` in the file name or alt text."""
        async with self._db.read() as conn:
            return await queries.list_media(
                conn, search=(search or "").strip() or None, before_id=before_id, limit=limit
            )

    async def usages(self, media_id: int) -> list[Usage]:
        """The campaigns and welcome emails that link to the image's files."""
        row = await self.get(media_id)
        async with self._db.read() as conn:
            return await queries.usages(conn, row.files)

    async def delete(self, media_id: int, *, actor: Actor, force: bool = False) -> list[Usage]:
        """Delete the image and its files; while content links to it, refuse (`MediaInUse`,
        naming where) unless `force`. Returns where it was used."""
        row = await self.get(media_id)
        async with self._db.read() as conn:
            used = await queries.usages(conn, row.files)
        if used and not force:
            places = ", ".join(f"{usage.kind} {usage.id}" for usage in used[:5])
            more = f" and {len(used) - 5} more" if len(used) > 5 else ""
            raise MediaInUse(
                f"the image is used by {places}{more}: their mail would show a broken image; "
                "delete anyway with force",
                [usage.as_dict() for usage in used],
            )
        async with self._db.write() as conn:
            deleted = await queries.delete_media(conn, media_id)
        if not deleted:
            raise NotFound(f"no image with id {media_id}")
        await self._remove_unheld(row.files)
        detail = {"format": row.format, "forced": bool(used), "used_by": len(used)}
        await self._record(actor, "media.deleted", f"media:{row.id}", detail)
        log.info("media.deleted", media_id=row.id, used_by=len(used))
        return used
