"""The media library through the admin API and the public site (CMP-6, issue 40 items 1 and
5): `POST /api/admin/media` (multipart `file` and `alt`), listing, search, deletion; the
files served immutable under their hash; every bad upload refused with a problem naming the
field and nothing left in the media directory."""

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.factories import admin_headers, api_client, make_settings
from tests.support import images
from tidings.domain.roles import Role


def media_settings(database_url: str, directory: Path, **media: Any) -> Any:
    return make_settings(
        database_url,
        media={"directory": str(directory), **media},
        site={"public_url": "https://news.example.org"},
    )


async def upload(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    data: bytes,
    *,
    filename: str = "picture.png",
    alt: str | None = "A picture",
) -> httpx.Response:
    form = {} if alt is None else {"alt": alt}
    return await client.post(
        "/api/admin/media", headers=headers, files={"file": (filename, data)}, data=form
    )


def served_path(url: str) -> str:
    return url.removeprefix("https://news.example.org")


async def test_an_upload_is_re_encoded_stored_and_served_for_ever(
    database_url: str, tmp_path: Path
) -> None:
    """The writer's path: upload a phone photo, get addresses that mail clients fetch,
    files without the photo's GPS, cached for a year; the same file again is the same
    image; the upload is in the audit log."""
    directory = tmp_path / "media"
    async with api_client(media_settings(database_url, directory)) as (client, container):
        headers = await admin_headers(container)
        answer = await upload(
            client,
            headers,
            images.photo_with_exif(1200, 600),
            filename="IMG_0001.jpg",
            alt="The harbour at dawn",
        )
        assert answer.status_code == 201, answer.text
        body = answer.json()
        assert (body["format"], body["filename"], body["alt"]) == (
            "jpeg",
            "IMG_0001.jpg",
            "The harbour at dawn",
        )
        assert (body["original_width"], body["original_height"]) == (1200, 600)
        assert (body["width_1x"], body["height_1x"]) == (504, 1008)  # turned upright
        assert body["markdown"] == f"![The harbour at dawn]({body['url']})"
        assert body["html"].startswith(
            f'<img src="{body["url_2x"]}" alt="The harbour at dawn" width="504"'
        )
        for url in (body["url"], body["url_2x"]):
            served = await client.get(served_path(url))
            assert served.status_code == 200
            assert served.headers["content-type"] == "image/jpeg"
            assert served.headers["cache-control"] == "public, max-age=31536000, immutable"
            assert served.headers["x-content-type-options"] == "nosniff"
            stored = images.opened(served.content)
            assert dict(stored.getexif()) == {}
            assert b"PhoneMaker" not in served.content
            name = url.rsplit("/", 1)[1]
            assert (directory / name).read_bytes() == served.content
        again = await upload(client, headers, images.photo_with_exif(1200, 600), alt="Again")
        assert again.status_code == 200
        assert again.json()["id"] == body["id"]
        assert len(images.stored_files(directory)) == 2
        found = await client.get("/api/admin/media", headers=headers, params={"q": "harbour"})
        assert [item["id"] for item in found.json()["items"]] == [body["id"]]
        nothing = await client.get("/api/admin/media", headers=headers, params={"q": "mountain"})
        assert nothing.json()["items"] == []
        actions = [entry.action for entry in await container.audit.list()]
        assert actions.count("media.uploaded") == 1


async def test_deleting_a_used_image_answers_409_naming_the_campaigns(
    database_url: str, tmp_path: Path
) -> None:
    """A script that cleans the library must not break a scheduled campaign's images
    without being told which; `force` deletes anyway, files included."""
    directory = tmp_path / "media"
    async with api_client(media_settings(database_url, directory)) as (client, container):
        headers = await admin_headers(container)
        image = (await upload(client, headers, images.animated_gif(), filename="wave.gif")).json()
        assert image["frames"] == 4
        await client.post(
            "/api/admin/newsletters",
            headers=headers,
            json={
                "slug": "weekly",
                "name": "Weekly",
                "sender_name": "Ed",
                "sender_address": "ed@example.org",
            },
        )
        made = await client.post(
            "/api/admin/campaigns",
            headers=headers,
            json={
                "newsletter": "weekly",
                "subject": "Waves",
                "body": f"Look\n\n{image['markdown']}\n",
            },
        )
        assert made.status_code == 201, made.text
        refused = await client.delete(f"/api/admin/media/{image['id']}", headers=headers)
        assert refused.status_code == 409
        problem = refused.json()
        assert problem["code"] == "media_in_use"
        assert problem["used_by"] == [
            {"kind": "campaign", "id": made.json()["id"], "title": "Waves"}
        ]
        assert problem["errors"][0]["field"] == "force"
        usages = await client.get(f"/api/admin/media/{image['id']}/usages", headers=headers)
        assert usages.json() == problem["used_by"]
        assert len(images.stored_files(directory)) == 2
        gone = await client.delete(
            f"/api/admin/media/{image['id']}", headers=headers, params={"force": "true"}
        )
        assert gone.status_code == 204
        assert images.stored_files(directory) == []
        assert (await client.get(served_path(image["url"]))).status_code == 404
        deleted = await container.audit.list(action="media.deleted")
        assert deleted[0].detail == {"format": "gif", "forced": True, "used_by": 1}


POLYGLOT = images.png(40, 30) + images.HTML_PAYLOAD


@pytest.mark.parametrize(
    ("data", "filename", "alt", "status", "field", "says"),
    [
        (POLYGLOT, "polyglot.png", "x", 422, "file", "also reads as HTML or script"),
        (
            images.png_with_text(images.HTML_PAYLOAD),
            "chunk.png",
            "x",
            422,
            "file",
            "HTML or script",
        ),
        (images.SVG, "logo.svg", "Logo", 422, "file", "SVG images are refused"),
        (
            images.png_bomb(50_000, 50_000),
            "bomb.png",
            "x",
            422,
            "file",
            "more than 40,000,000 pixels",
        ),
        (b"%PDF-1.4 not an image", "doc.pdf", "x", 422, "file", "only PNG, JPEG, GIF or WebP"),
        (images.png(40, 30), "../../etc/cron.d/x.png", "x", 422, "file", "path separators"),
        (images.png(40, 30), "dir\\x.png", "x", 422, "file", "path separators"),
        (images.png(40, 30), "name\x1b[31m.png", "x", 422, "file", "control characters"),
        (images.png(40, 30), "ok.png", " ", 422, "alt", "alt text is required"),
        (images.png(40, 30), "ok.png", None, 422, "body.alt", "Field required"),
    ],
)
async def test_bad_uploads_are_refused_by_field_with_nothing_left_behind(
    sqlite_url: str,
    tmp_path: Path,
    data: bytes,
    filename: str,
    alt: str | None,
    status: int,
    field: str,
    says: str,
) -> None:
    """Each refusal says which field and why, as problem+json, and leaves no file: a
    refused upload half-stored is a polyglot or a bomb waiting on the public site."""
    directory = tmp_path / "media"
    async with api_client(media_settings(sqlite_url, directory)) as (client, container):
        headers = await admin_headers(container)
        answer = await upload(client, headers, data, filename=filename, alt=alt)
        assert answer.status_code == status, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        problem = answer.json()
        assert problem["errors"][0]["field"] == field
        assert says in problem["errors"][0]["message"]
        assert images.stored_files(directory) == []
        listed = await client.get("/api/admin/media", headers=headers)
        assert listed.json()["items"] == []


async def test_an_upload_over_the_limit_is_refused_while_it_streams(
    sqlite_url: str, tmp_path: Path
) -> None:
    """A client that streams 50 MB (no Content-Length) into a 1 MB limit must be stopped
    near the limit, not buffered whole; one that announces its size is refused at once."""
    directory = tmp_path / "media"
    settings = media_settings(sqlite_url, directory, max_upload_bytes=1_048_576)
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        boundary = "tidingsboundary"
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="alt"\r\n\r\nBig\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.png"\r\n'
            "Content-Type: image/png\r\n\r\n"
        ).encode()
        sent = 0

        async def body() -> Any:
            nonlocal sent
            yield head + images.png(40, 30)
            for _ in range(800):  # 50 MB in 64 KiB pieces
                sent += 65_536
                yield b"\0" * 65_536

        streamed = await client.post(
            "/api/admin/media",
            headers={**headers, "Content-Type": f"multipart/form-data; boundary={boundary}"},
            content=body(),
        )
        assert streamed.status_code == 413
        assert streamed.json()["errors"][0]["field"] == "file"
        assert sent < 2 * 1_048_576  # stopped a little past the limit, not at 50 MB
        announced = await client.post(
            "/api/admin/media",
            headers={
                **headers,
                "Content-Type": f"multipart/form-data; boundary={boundary}",
                "Content-Length": str(50_000_000),
            },
            content=head,
        )
        assert announced.status_code == 413
        assert "media.max_upload_bytes" in announced.json()["detail"]
        # Just over the file limit but inside the form's allowance: the use case refuses it.
        over = await upload(client, headers, images.png(40, 30) + b"\0" * 1_048_576)
        assert over.status_code == 413
        assert over.json()["errors"] == [
            {
                "field": "file",
                "message": "the file is larger than 1,048,576 bytes (media.max_upload_bytes)",
            }
        ]
        assert images.stored_files(directory) == []


async def test_a_viewer_key_lists_but_cannot_upload_or_delete(
    sqlite_url: str, tmp_path: Path
) -> None:
    """A read-only key (a dashboard's) must not put files on the public site."""
    directory = tmp_path / "media"
    async with api_client(media_settings(sqlite_url, directory)) as (client, container):
        owner = await admin_headers(container)
        viewer_key = await container.api_keys.create("dashboard", role=Role.VIEWER)
        viewer = {"Authorization": f"Bearer {viewer_key.token}"}
        refused = await upload(client, viewer, images.png(40, 30))
        assert refused.status_code == 403
        assert images.stored_files(directory) == []
        image = (await upload(client, owner, images.png(40, 30))).json()
        assert (await client.get("/api/admin/media", headers=viewer)).status_code == 200
        assert (
            await client.delete(f"/api/admin/media/{image['id']}", headers=viewer)
        ).status_code == 403
        assert len(images.stored_files(directory)) == 1


@pytest.mark.parametrize(
    "path",
    [
        "/media/0123456789abcdef0123456789abcdef.png",  # well formed, not stored
        "/media/..%2F..%2Fetc%2Fpasswd",
        "/media/%2e%2e",
        "/media/tidings.db",
        "/media/.incoming-abc",
    ],
)
async def test_the_public_site_serves_stored_names_only(
    sqlite_url: str, tmp_path: Path, path: str
) -> None:
    """/media/ is open to the world: it must never reach a file outside the library."""
    directory = tmp_path / "media"
    directory.mkdir()
    (directory / "tidings.db").write_text("secret")
    (directory / ".incoming-abc").write_text("half")
    async with api_client(media_settings(sqlite_url, directory)) as (client, _container):
        answer = await client.get(path)
        assert answer.status_code == 404
        assert "secret" not in answer.text
