"""`tidings media add|list|delete` (CMP-6, issue 40 items 1 and 5): an operator scripting the
library gets the same checks as the API, a message naming what is wrong, and no file left
behind when an image is refused."""

import json
from pathlib import Path

import pytest

from tests.support import images
from tests.support.cli import Ran, clean_env, tidings


def media_cli(database_url: str, directory: Path, *args: str, **settings: str) -> Ran:
    env = clean_env(
        DATABASE_URL=database_url,
        LOG_FORMAT="json",
        MEDIA_DIRECTORY=str(directory),
        SITE_PUBLIC_URL="https://news.example.org",
        **settings,
    )
    return tidings("media", *args, env=env)


def test_add_list_and_delete_an_image(sqlite_url: str, tmp_path: Path) -> None:
    """An operator adds a banner with its alt text, finds it, and deletes it: the files
    come and go with it, and adding the same file twice stores it once."""
    directory = tmp_path / "media"
    source = tmp_path / "Banner 2026.png"
    source.write_bytes(images.png(2000, 500))
    added = media_cli(sqlite_url, directory, "add", str(source), "--alt", "Spring banner", "--json")
    assert added.returncode == 0, added.stderr
    image = json.loads(added.stdout)
    assert image["created"] is True
    assert (image["filename"], image["width"], image["height"]) == ("Banner 2026.png", 504, 126)
    assert image["url"].startswith("https://news.example.org/media/")
    stored = images.opened((directory / image["url"].rsplit("/", 1)[1]).read_bytes())
    assert stored.size == (504, 126)
    assert images.opened((directory / image["url_2x"].rsplit("/", 1)[1]).read_bytes()).size == (
        1008,
        252,
    )
    again = media_cli(sqlite_url, directory, "add", str(source), "--alt", "Spring banner")
    assert again.returncode == 0, again.stderr
    assert f"already in the library as image {image['id']}" in again.stderr
    assert image["url"] in again.stdout
    assert len(images.stored_files(directory)) == 2
    listed = json.loads(
        media_cli(sqlite_url, directory, "list", "--search", "spring", "--json").stdout
    )
    assert [row["id"] for row in listed] == [image["id"]]
    assert (
        json.loads(media_cli(sqlite_url, directory, "list", "--search", "autumn", "--json").stdout)
        == []
    )
    deleted = media_cli(sqlite_url, directory, "delete", str(image["id"]))
    assert deleted.returncode == 0, deleted.stderr
    assert images.stored_files(directory) == []


def test_delete_refuses_a_used_image_unless_forced(sqlite_url: str, tmp_path: Path) -> None:
    """The command line warns where an image is used, as the API and the Media page do."""
    directory = tmp_path / "media"
    source = tmp_path / "logo.png"
    source.write_bytes(images.png(100, 100))
    image = json.loads(
        media_cli(sqlite_url, directory, "add", str(source), "--alt", "Logo", "--json").stdout
    )
    env = clean_env(DATABASE_URL=sqlite_url, LOG_FORMAT="json")
    assert (
        tidings(
            "newsletters",
            "create",
            "weekly",
            "--name",
            "Weekly",
            "--sender-name",
            "Ed",
            "--sender-address",
            "ed@example.org",
            env=env,
        ).returncode
        == 0
    )
    body = tmp_path / "body.md"
    body.write_text(f"Hello\n\n{image['markdown']}\n")
    made = tidings(
        "campaign",
        "create",
        "--newsletter",
        "weekly",
        "--subject",
        "Logo week",
        "--from-file",
        str(body),
        env=env,
    )
    assert made.returncode == 0, made.stderr
    refused = media_cli(sqlite_url, directory, "delete", str(image["id"]))
    assert refused.returncode == 1
    assert "the image is used by campaign" in refused.stderr
    assert len(images.stored_files(directory)) == 1
    forced = media_cli(sqlite_url, directory, "delete", str(image["id"]), "--force")
    assert forced.returncode == 0, forced.stderr
    assert "It was still used by campaign" in forced.stderr
    assert images.stored_files(directory) == []


@pytest.mark.parametrize(
    ("name", "data", "alt", "says"),
    [
        (
            "drawing.svg",
            images.SVG,
            "A drawing",
            "SVG images are refused: they can carry script (file)",
        ),
        ("evil.png", images.png(40, 30) + images.HTML_PAYLOAD, "x", "also reads as HTML or script"),
        (
            "bomb.png",
            images.png_bomb(),
            "x",
            "more than 40,000,000 pixels (media.max_pixels) (file)",
        ),
        ("notes.txt", b"hello", "x", "only PNG, JPEG, GIF or WebP"),
        ("bell\x07.png", images.png(40, 30), "x", "must not contain control characters (file)"),
        ("fine.png", images.png(40, 30), "", "alt text is required"),
        (
            "big.png",
            images.png(40, 30) + b"\0" * 5000,
            "x",
            "larger than 4,096 bytes (media.max_upload_bytes) (file)",
        ),
    ],
)
def test_a_refused_image_says_why_and_leaves_nothing(
    sqlite_url: str, tmp_path: Path, name: str, data: bytes, alt: str, says: str
) -> None:
    """A script must be able to tell the operator what to fix, and a refused file must not
    be left half-stored in the media directory."""
    directory = tmp_path / "media"
    source = tmp_path / name
    source.write_bytes(data)
    refused = media_cli(
        sqlite_url, directory, "add", str(source), "--alt", alt, MEDIA_MAX_UPLOAD_BYTES="4096"
    )
    assert refused.returncode == 1
    assert says in refused.stderr
    assert images.stored_files(directory) == []
