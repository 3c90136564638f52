"""The Media page and the editor's image panel over HTTP (CMP-6, issue 40 items 1 and 5): an
upload with its alt text, a refusal that keeps what was typed and names the field, the list
and its search, a used image's deletion stopped by a page saying where it is used, viewers
kept read-only, every change audited."""

import re
from pathlib import Path

from tests.factories import make_settings
from tests.support import images
from tests.support.admin_ui import (
    PASSWORD,
    composed_campaign,
    csrf_from,
    sign_in,
    signed_in,
    ui_app,
)
from tidings.domain.roles import Role


def _settings(database_url: str, directory: Path) -> object:
    return make_settings(database_url, media={"directory": str(directory)})


async def test_upload_search_and_delete_from_the_media_page(
    sqlite_url: str, tmp_path: Path
) -> None:
    """The operator's round trip on the page itself; a refused upload tells them which
    field and keeps the alt text they typed."""
    directory = tmp_path / "media"
    async with ui_app(_settings(sqlite_url, directory)) as (browser, container):  # type: ignore[arg-type]
        client = browser()
        csrf = await signed_in(client, container)
        shown = await client.get("/admin/media")
        assert shown.status_code == 200
        assert 'enctype="multipart/form-data"' in shown.text
        assert "No images yet." in shown.text
        refused = await client.post(
            "/admin/media",
            data={"csrf_token": csrf, "alt": "A kind description"},
            files={"file": ("drawing.svg", images.SVG, "image/svg+xml")},
        )
        assert refused.status_code == 422
        assert "SVG images are refused" in refused.text
        file_field = re.search(r'<input id="file"[^>]*>', refused.text)
        assert file_field is not None
        assert 'aria-invalid="true"' in file_field.group()
        assert 'value="A kind description"' in refused.text
        assert images.stored_files(directory) == []
        added = await client.post(
            "/admin/media",
            data={"csrf_token": csrf, "alt": "Boats in the harbour"},
            files={"file": ("boats.png", images.png(1000, 500), "image/png")},
        )
        assert added.status_code == 303
        assert added.headers["location"].startswith("/admin/media?added=")
        page = await client.get(added.headers["location"])
        assert "is in the library" in page.text
        assert 'alt="Boats in the harbour" width="504" height="252"' in page.text
        assert "boats.png" in (await client.get("/admin/media", params={"q": "HARBOUR"})).text
        assert (
            "No image matches" in (await client.get("/admin/media", params={"q": "mountain"})).text
        )
        (row,) = await container.media.search()
        gone = await client.post(f"/admin/media/{row.id}/delete", data={"csrf_token": csrf})
        assert gone.status_code == 303
        assert images.stored_files(directory) == []
        actions = [(entry.action, entry.actor) for entry in await container.audit.list()]
        assert ("media.uploaded", "admin:1") in actions
        assert ("media.deleted", "admin:1") in actions


async def test_the_editor_lists_images_and_uploads_in_place(
    sqlite_url: str, tmp_path: Path
) -> None:
    """The editor's panel offers the library's images with what it inserts, and its upload
    answers JSON so the draft stays open; a used image then cannot be deleted without the
    page that names the campaign."""
    directory = tmp_path / "media"
    async with ui_app(_settings(sqlite_url, directory)) as (browser, container):  # type: ignore[arg-type]
        client = browser()
        csrf = await signed_in(client, container)
        campaign_url, campaign_id = await composed_campaign(client, container, csrf, readers=1)
        uploaded = await client.post(
            "/admin/media",
            data={"csrf_token": csrf, "alt": "Wave"},
            files={"file": ("wave.gif", images.animated_gif(), "image/gif")},
            headers={"Accept": "application/json"},
        )
        assert uploaded.status_code == 200
        image = uploaded.json()
        assert (image["filename"], image["frames"], image["created"]) == ("wave.gif", 4, True)
        refused = await client.post(
            "/admin/media",
            data={"csrf_token": csrf, "alt": ""},
            files={"file": ("x.png", images.png(10, 10), "image/png")},
            headers={"Accept": "application/json"},
        )
        assert refused.status_code == 422
        assert refused.json()["field"] == "alt"
        editor = await client.get(campaign_url)
        assert 'id="media_pick"' in editor.text
        assert f'data-url="{image["url"]}"' in editor.text
        assert f'data-url-2x="{image["url_2x"]}"' in editor.text
        saved = await client.post(
            campaign_url,
            data={
                "csrf_token": csrf,
                "subject": "Issue 1",
                "preheader": "",
                "body": f"Hi\n\n{image['markdown']}\n",
                "body_format": "markdown",
            },
        )
        assert saved.status_code == 303
        stopped = await client.post(f"/admin/media/{image['id']}/delete", data={"csrf_token": csrf})
        assert stopped.status_code == 409
        assert f'href="/admin/campaigns/{campaign_id}"' in stopped.text
        assert "Delete anyway" in stopped.text
        assert len(images.stored_files(directory)) == 2
        forced = await client.post(
            f"/admin/media/{image['id']}/delete", data={"csrf_token": csrf, "force": "yes"}
        )
        assert forced.status_code == 303
        assert images.stored_files(directory) == []


async def test_a_viewer_sees_the_library_but_cannot_change_it(
    sqlite_url: str, tmp_path: Path
) -> None:
    """A read-only operator must not put files on the public site or remove them."""
    directory = tmp_path / "media"
    async with ui_app(_settings(sqlite_url, directory)) as (browser, container):  # type: ignore[arg-type]
        await container.admins.create("viewer@example.org", PASSWORD, role=Role.VIEWER)
        client = browser()
        assert (await sign_in(client, "viewer@example.org")).status_code == 303
        page = await client.get("/admin/media")
        assert page.status_code == 200
        assert 'type="file"' not in page.text
        csrf = csrf_from(await client.get("/admin/account"))
        refused = await client.post(
            "/admin/media",
            data={"csrf_token": csrf, "alt": "x"},
            files={"file": ("x.png", images.png(10, 10), "image/png")},
        )
        assert refused.status_code == 403
        assert images.stored_files(directory) == []
