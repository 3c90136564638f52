"""Named queries for the media library (CMP-6): its rows, and where content links to a file."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.errors import Conflict
from tidings.domain.media import Usage
from tidings.storage.errors import constraint_errors
from tidings.storage.tables import campaigns, media, newsletters

# Content that links to an image names its file: at most this many places are listed.
MOST_USAGES = 50


class AlreadyStored(Conflict):
    """Another upload of the same bytes was stored meanwhile (the unique hash)."""


@dataclass(frozen=True, slots=True)
class MediaRow:
    id: int
    source_sha256: str
    filename: str
    alt: str
    format: str
    original_width: int
    original_height: int
    frames: int
    file_1x: str
    width_1x: int
    height_1x: int
    bytes_1x: int
    file_2x: str
    width_2x: int
    height_2x: int
    bytes_2x: int
    created_at: datetime
    created_by: str

    @property
    def files(self) -> frozenset[str]:
        return frozenset({self.file_1x, self.file_2x})


def _row(row: Any) -> MediaRow:
    return MediaRow(**dict(row._mapping))


async def insert_media(conn: AsyncConnection, **values: Any) -> MediaRow:
    with constraint_errors({"uq_media_source_sha256": AlreadyStored}):
        result = await conn.execute(insert(media).values(**values).returning(media))
    return _row(result.one())


async def media_by_source(conn: AsyncConnection, source_sha256: str) -> MediaRow | None:
    query = select(media).where(media.c.source_sha256 == source_sha256)
    row = (await conn.execute(query)).first()
    return None if row is None else _row(row)


async def get_media(conn: AsyncConnection, media_id: int) -> MediaRow | None:
    row = (await conn.execute(select(media).where(media.c.id == media_id))).first()
    return None if row is None else _row(row)


def _like(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def list_media(
    conn: AsyncConnection, *, search: str | None, before_id: int | None, limit: int
) -> list[MediaRow]:
    """Newest first; `search` matches the file name or the alt text, case-insensitively."""
    query = select(media).order_by(media.c.id.desc()).limit(limit)
    if before_id is not None:
        query = query.where(media.c.id < before_id)
    if search:
        pattern = _like(search)
        query = query.where(
            or_(
                func.lower(media.c.filename).like(pattern, escape="\\"),
                func.lower(media.c.alt).like(pattern, escape="\\"),
            )
        )
    return [_row(row) for row in await conn.execute(query)]


async def delete_media(conn: AsyncConnection, media_id: int) -> bool:
    return (await conn.execute(delete(media).where(media.c.id == media_id))).rowcount == 1


async def files_in_use(conn: AsyncConnection, names: frozenset[str]) -> frozenset[str]:
    """Which of `names` a media row still holds (two uploads can re-encode to one file)."""
    if not names:
        return frozenset()
    query = select(media.c.file_1x, media.c.file_2x).where(
        or_(media.c.file_1x.in_(names), media.c.file_2x.in_(names))
    )
    held = {name for row in await conn.execute(query) for name in row}
    return frozenset(held & names)


async def usages(conn: AsyncConnection, names: frozenset[str]) -> list[Usage]:
    """The campaigns whose body, and the newsletters whose welcome email, name one of the
    files `names` (any campaign, sent ones included: their archive pages show it)."""
    found: list[Usage] = []
    in_body = or_(*(campaigns.c.body.contains(name, autoescape=True) for name in names))
    query = (
        select(campaigns.c.id, campaigns.c.subject)
        .where(in_body)
        .order_by(campaigns.c.id.desc())
        .limit(MOST_USAGES)
    )
    found += [Usage("campaign", row.id, row.subject) for row in await conn.execute(query)]
    in_welcome = or_(
        *(newsletters.c.welcome_body.contains(name, autoescape=True) for name in names)
    )
    query = (
        select(newsletters.c.id, newsletters.c.name).where(in_welcome).order_by(newsletters.c.id)
    )
    found += [Usage("newsletter", row.id, row.name) for row in await conn.execute(query)]
    return found
