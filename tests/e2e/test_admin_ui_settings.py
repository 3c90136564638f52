"""The settings page (issue 25 item 6): the owner sees the effective configuration with
secrets masked and where each value came from, and a go-live checklist linking the docs;
nobody else sees it."""

import pytest

from tests.factories import make_settings, real_mail
from tests.support.admin_ui import PASSWORD, sign_in, signed_in, ui_app
from tidings.domain.roles import Role

SECRET = "relay-password-do-not-show"


async def test_the_owner_sees_settings_masked_with_their_origin_and_the_checklist(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Going live means knowing which value is in force and why; a secret on a page is a
    leak, and a checklist item must say how to fix it."""
    monkeypatch.setenv("TIDINGS_SITE_NAME", "The Gazette")
    settings = make_settings(
        database_url,
        smtp={"host": "127.0.0.1", "port": 1, "password": SECRET},
        admin_ui={"docs_url": "https://docs.example.org/tidings/docs/"},
    )
    async with ui_app(settings) as (browser, container):
        client = browser()
        await signed_in(client, container)
        shown = await client.get("/admin/settings")
        assert shown.status_code == 200
        text = shown.text
        assert SECRET not in text
        assert "<code>********</code>" in text
        row = text[text.index("<code>site.name</code>") :].split("</tr>", 1)[0]
        assert "The Gazette" in row
        assert "<strong>environment</strong>" in row
        row = text[text.index("<code>smtp.host</code>") :].split("</tr>", 1)[0]
        assert "<strong>start-up</strong>" in row
        row = text[text.index("<code>queue.lease_seconds</code>") :].split("</tr>", 1)[0]
        assert ">default<" in row
        assert "✗ Public URL on https" in text
        assert "✗ Postal address" in text
        assert (
            'href="https://docs.example.org/tidings/docs/going-live.md#4-https-with-a-reverse-proxy"'
            in text
        )

        editor = browser()
        await container.admins.create("editor@example.org", PASSWORD, role=Role.EDITOR)
        assert (await sign_in(editor, "editor@example.org")).status_code == 303
        assert (await editor.get("/admin/settings")).status_code == 403
        assert "/admin/settings" not in (await editor.get("/admin")).text


async def test_a_password_inside_a_url_setting_is_masked_on_the_page(database_url: str) -> None:
    """A key in a URL's userinfo or query string is a secret like any other: not on a page."""
    settings = make_settings(
        database_url,
        mailgun={"api_base_url": "https://api:key-hunter3@api.mailgun.test/?token=tok-hunter4"},
    )
    async with ui_app(settings) as (browser, container):
        client = browser()
        await signed_in(client, container)
        text = (await client.get("/admin/settings")).text
    assert "hunter" not in text
    assert "https://api:********@api.mailgun.test/?token=********" in text


async def test_a_ready_site_passes_the_identity_items(database_url: str) -> None:
    """The checklist must not nag a site that has done the work: with its identity set, only
    the provider items remain."""
    sections = real_mail()
    sections["site"] = {**sections["site"], "name": "The Gazette"}
    async with ui_app(make_settings(database_url, **sections)) as (browser, container):
        client = browser()
        await signed_in(client, container)
        text = (await client.get("/admin/settings")).text
        for done in ("Public URL on https", "Postal address", "From address and site name"):
            assert f"✓ {done}" in text
        assert "✗ Provider configured and tested" in text
        assert "2 of 5 still to do" in text
