"""The media library's storage on SQLite and PostgreSQL (CMP-6, issue 40 items 1 and 5): one
row and one set of files per distinct upload, search, where an image is used, deletion — and
every refusal leaves the media directory as it was."""

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support import images, rows
from tidings.access.audit import AuditLog
from tidings.campaigns.media import MediaLibrary
from tidings.domain.audit import Actor
from tidings.domain.errors import NotFound
from tidings.domain.media import MediaInUse, MediaRefused, MediaTooLarge
from tidings.storage.database import Database
from tidings.storage.media_files import LocalMediaStore

NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)
ACTOR = Actor.command_line("tester")


def reader(data: bytes) -> Callable[[int], Awaitable[bytes]]:
    """An upload read in chunks, as the API's UploadFile and the CLI's file are read; the
    offsets it was asked for are kept in `reader.asked`."""
    offset = 0

    async def read(size: int) -> bytes:
        nonlocal offset
        piece = data[offset : offset + size]
        offset += len(piece)
        read.asked.append(offset)  # type: ignore[attr-defined]
        return piece

    read.asked = []  # type: ignore[attr-defined]
    return read


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "media"


@pytest.fixture
def library(db: Database, directory: Path) -> MediaLibrary:
    audit = AuditLog(db, lambda: NOW)
    return MediaLibrary(
        db,
        LocalMediaStore(directory),
        lambda: NOW,
        audit.record,
        public_url="https://news.example.org/",
        max_bytes=2_000_000,
        max_pixels=40_000_000,
    )


async def test_an_upload_is_stored_as_two_sizes_under_content_hash_names(
    library: MediaLibrary, directory: Path, db: Database
) -> None:
    """What the mail links to must exist, be Pillow's re-encoding, and be named by its
    hash so it can be cached for ever; the upload is audited."""
    added = await library.add(
        reader(images.png(1600, 900)), filename="field.png", alt="A field", actor=ACTOR
    )
    row = added.media
    assert added.created
    assert images.stored_files(directory) == sorted([row.file_1x, row.file_2x])
    one = images.opened((directory / row.file_1x).read_bytes())
    two = images.opened((directory / row.file_2x).read_bytes())
    assert (one.size, two.size) == ((504, 284), (1008, 567))
    assert (row.width_1x, row.height_1x, row.width_2x, row.height_2x) == (504, 284, 1008, 567)
    assert library.url(row.file_1x) == f"https://news.example.org/media/{row.file_1x}"
    entries = await AuditLog(db, lambda: NOW).list(action="media.uploaded")
    assert [(entry.actor, entry.target) for entry in entries] == [("cli:tester", f"media:{row.id}")]


async def test_the_same_file_uploaded_twice_is_stored_once(
    library: MediaLibrary, directory: Path
) -> None:
    """Writers upload the same logo every week: one row, one set of files."""
    data = images.png(800, 600)
    first = await library.add(reader(data), filename="logo.png", alt="Logo", actor=ACTOR)
    again = await library.add(reader(data), filename="logo-copy.png", alt="Logo", actor=ACTOR)
    assert (first.created, again.created) == (True, False)
    assert again.media.id == first.media.id
    assert len(await library.search()) == 1
    assert len(images.stored_files(directory)) == 2


@pytest.mark.parametrize(
    ("data", "filename", "alt", "refusal"),
    [
        (images.SVG, "drawing.svg", "A drawing", MediaRefused),
        (images.png(40, 30) + images.HTML_PAYLOAD, "polyglot.png", "x", MediaRefused),
        (images.png_bomb(), "bomb.png", "x", MediaRefused),
        (b"plain text", "notes.png", "x", MediaRefused),
        (images.png(40, 30), "../escape.png", "x", MediaRefused),
        (images.png(40, 30), "bell\x07.png", "x", MediaRefused),
        (images.png(40, 30), "fine.png", "  ", MediaRefused),
        (b"", "empty.png", "x", MediaRefused),
    ],
)
async def test_a_refused_upload_leaves_no_file_and_no_row(
    library: MediaLibrary,
    directory: Path,
    data: bytes,
    filename: str,
    alt: str,
    refusal: type[Exception],
) -> None:
    """A refusal half-done (a file without a row, a temporary file) fills the disk and
    the backups with junk nobody can see or delete."""
    with pytest.raises(refusal):
        await library.add(reader(data), filename=filename, alt=alt, actor=ACTOR)
    assert images.stored_files(directory) == []
    assert await library.search() == []


async def test_an_oversized_upload_stops_being_read_at_the_limit(
    library: MediaLibrary, directory: Path
) -> None:
    """Reading a 20 MB upload whole to learn it is over 2 MB is how a server runs out of
    memory: reading stops at the first chunk past the limit."""
    huge = images.png(40, 30) + b"\0" * 20_000_000
    read = reader(huge)
    with pytest.raises(MediaTooLarge, match="larger than 2,000,000 bytes") as refused:
        await library.add(read, filename="huge.png", alt="x", actor=ACTOR)
    assert refused.value.field == "file"
    assert max(read.asked) <= 2_000_000 + 65_536  # type: ignore[attr-defined]
    assert images.stored_files(directory) == []


async def test_search_finds_by_file_name_or_alt_text(library: MediaLibrary) -> None:
    """A library of hundreds of images is only usable if one can be found by a word."""
    await library.add(
        reader(images.png(50, 50, (1, 1, 1))),
        filename="Harbour.png",
        alt="Boats at dawn",
        actor=ACTOR,
    )
    await library.add(
        reader(images.png(50, 50, (2, 2, 2))),
        filename="team.jpg.png",
        alt="The team, 100% present",
        actor=ACTOR,
    )
    assert [row.filename for row in await library.search(search="harbour")] == ["Harbour.png"]
    assert [row.filename for row in await library.search(search="BOATS")] == ["Harbour.png"]
    assert [row.filename for row in await library.search(search="100%")] == ["team.jpg.png"]
    # A wildcard is a character, not "everything".
    assert [row.filename for row in await library.search(search="%")] == ["team.jpg.png"]
    assert await library.search(search="_") == []
    assert len(await library.search(search="")) == 2
    newest, oldest = await library.search()
    assert [row.id for row in await library.search(before_id=newest.id)] == [oldest.id]


async def test_deleting_a_used_image_is_refused_with_where_it_is_used(
    library: MediaLibrary, directory: Path, db: Database
) -> None:
    """Deleting an image a campaign shows breaks that campaign's mail and archive page:
    the operator is told which campaigns and welcome emails, and must insist."""
    added = (
        await library.add(reader(images.png(900, 300)), filename="b.png", alt="Banner", actor=ACTOR)
    ).media
    async with db.write() as conn:
        newsletter_id = await rows.newsletter(
            conn, name="Weekly", welcome_body=f"Welcome ![x]({library.url(added.file_1x)})"
        )
        used_by = await rows.campaign(
            conn, newsletter_id, subject="Spring issue", body=f'<img src="/media/{added.file_2x}">'
        )
        await rows.campaign(conn, newsletter_id, subject="Unrelated", body="No images")
    with pytest.raises(MediaInUse) as refused:
        await library.delete(added.id, actor=ACTOR)
    assert refused.value.used_by == [
        {"kind": "campaign", "id": used_by, "title": "Spring issue"},
        {"kind": "newsletter", "id": newsletter_id, "title": "Weekly"},
    ]
    assert len(images.stored_files(directory)) == 2  # nothing deleted
    gone = await library.delete(added.id, actor=ACTOR, force=True)
    assert [usage.id for usage in gone] == [used_by, newsletter_id]
    assert images.stored_files(directory) == []
    with pytest.raises(NotFound):
        await library.get(added.id)
    entries = await AuditLog(db, lambda: NOW).list(action="media.deleted")
    assert entries[0].detail == {"format": "png", "forced": True, "used_by": 2}


async def test_an_unused_image_is_deleted_with_its_files(
    library: MediaLibrary, directory: Path
) -> None:
    """Deleting frees the disk; another image's files stay."""
    kept = (
        await library.add(
            reader(images.png(60, 60, (5, 5, 5))), filename="k.png", alt="Kept", actor=ACTOR
        )
    ).media
    dropped = (
        await library.add(
            reader(images.png(60, 60, (9, 9, 9))), filename="d.png", alt="Dropped", actor=ACTOR
        )
    ).media
    assert await library.delete(dropped.id, actor=ACTOR) == []
    assert images.stored_files(directory) == [kept.file_1x]
    with pytest.raises(NotFound):
        await library.delete(dropped.id, actor=ACTOR)
