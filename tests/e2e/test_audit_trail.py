"""Sends, cancels, deletes and imports are in the audit log with who did them, from where
(UI-2): through the API as the key, through the UI as the operator; refusals are not."""

import json
from pathlib import Path

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.admin_ui import signed_in, ui_app
from tests.support.cli import clean_env, tidings
from tests.support.sending import create_campaign, queued_send, seed


async def test_api_sends_cancels_deletes_and_imports_are_audited(database_url: str) -> None:
    """After a bad send or a vanished list, the first question is who did it, and when."""
    async with api_client(make_settings(database_url)) as (client, container):
        campaign_id = await queued_send(client, container, readers=2)
        keys = await container.api_keys.list()
        headers = await admin_headers(container, "second")
        draft = await create_campaign(client, headers)
        scheduled = await client.post(
            f"/api/admin/campaigns/{draft}/schedule",
            headers=headers,
            json={"scheduled_at": "2099-01-01T09:00:00Z"},
        )
        assert scheduled.status_code < 300, scheduled.text
        cancelled = await client.post(f"/api/admin/campaigns/{draft}/cancel", headers=headers)
        assert cancelled.status_code < 300, cancelled.text
        unwanted = await create_campaign(client, headers)
        removed = await client.delete(f"/api/admin/campaigns/{unwanted}", headers=headers)
        assert removed.status_code == 204, removed.text
        missing = await client.delete("/api/admin/campaigns/987654", headers=headers)
        assert missing.status_code == 404
        imported = await client.post(
            "/api/admin/subscribers/import?newsletter=weekly",
            headers={**headers, "content-type": "text/csv"},
            content=b"email\nimported.reader@example.org\n",
        )
        assert imported.status_code < 300, imported.text
        entries = await container.audit.list()
        [second] = [key for key in await container.api_keys.list() if key.id != keys[0].id]
        by_action = {entry.action: entry for entry in entries}
        assert by_action["campaign.send"].actor == f"key:{keys[0].id}"
        assert by_action["campaign.send"].target == f"campaign:{campaign_id}"
        assert by_action["campaign.schedule"].target == f"campaign:{draft}"
        assert by_action["campaign.cancel"].actor == f"key:{second.id}"
        assert by_action["campaign.cancel"].target == f"campaign:{draft}"
        assert by_action["campaign.delete"].target == f"campaign:{unwanted}"
        assert "subscribers.import" in by_action
        deletes = [e.target for e in entries if e.action == "campaign.delete"]
        assert deletes == [f"campaign:{unwanted}"]  # the refused one is not there
        assert all(entry.client_ip == "127.0.0.1" for entry in entries)


async def test_ui_deletes_are_audited_as_the_operator(database_url: str) -> None:
    """The UI is the other way in; its actions carry the operator's id, not a key's."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        admin = await container.admins.find("operator@example.org")
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 1)
        reader = (await client.get("/api/admin/subscribers", headers=headers)).json()["items"][0]
        deleted = await client.post(
            f"/admin/subscribers/{reader['id']}/delete",
            data={"csrf_token": csrf, "confirm_email": reader["email"]},
        )
        assert deleted.status_code == 303, deleted.text
        entry = (await container.audit.list(action="subscriber."))[0]
        assert entry.actor == f"admin:{admin.id}"
        assert entry.target == f"subscriber:{reader['id']}"


async def test_webhook_urls_archives_exports_and_transactional_sends_are_audited(
    database_url: str,
) -> None:
    """Where the audience's events go, what is published, who took a copy of the whole audience
    and who mailed someone directly are the questions after a leak (issue 35 item 5: the
    reviewer redirected a webhook, published an archive, exported the audience and sent a
    transactional email, and found none of it in the log). No address is written."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        [key] = await container.api_keys.list()
        newsletter = await create_newsletter(client, headers)
        await seed(container, "weekly", 3)
        made = await client.post(
            "/api/admin/webhooks",
            headers=headers,
            json={"url": "https://hooks.example.org/in?token=s3cret", "event_types": ["*"]},
        )
        assert made.status_code == 201, made.text
        endpoint = made.json()["id"]
        described = await client.patch(
            f"/api/admin/webhooks/{endpoint}", headers=headers, json={"description": "CRM"}
        )
        assert described.status_code == 200, described.text
        moved = await client.patch(
            f"/api/admin/webhooks/{endpoint}",
            headers=headers,
            json={"url": "https://collector.example.net/in"},
        )
        assert moved.status_code == 200, moved.text
        renamed = await client.patch(
            "/api/admin/newsletters/weekly", headers=headers, json={"name": "Weekly Notes"}
        )
        assert renamed.status_code == 200, renamed.text
        published = await client.patch(
            "/api/admin/newsletters/weekly", headers=headers, json={"archive": True}
        )
        assert published.status_code == 200, published.text
        exported = await client.get(
            "/api/admin/subscribers/export?newsletter=weekly", headers=headers
        )
        assert exported.status_code == 200, exported.text
        sent = await client.post(
            "/api/admin/emails",
            headers=headers,
            json={"to": "someone@example.org", "subject": "Reset", "text": "Your link"},
        )
        assert sent.status_code == 202, sent.text
        entries = await container.audit.list()
        # Entries with a detail: the plain ones of writes no route names (`newsletter.create`,
        # `webhook.update`) are tested in test_audit_complete.
        shown = [(e.action, e.target, e.detail) for e in reversed(entries) if e.detail]
        assert shown == [
            ("webhook.created", f"webhook:{endpoint}", {"host": "hooks.example.org"}),
            ("webhook.url_changed", f"webhook:{endpoint}", {"host": "collector.example.net"}),
            (
                "newsletter.archive",
                f"newsletter:{newsletter['id']}",
                {"archive": True, "slug": "weekly"},
            ),
            ("subscribers.export", None, {"rows": 3, "filter": {"newsletter": "weekly"}}),
            ("email.send", f"job:{sent.json()['job_id']}", {"created": True}),
        ]
        assert {entry.actor for entry in entries} == {f"key:{key.id}"}
        assert not any("@" in str(entry) or "s3cret" in str(entry) for entry in entries)


async def test_ui_archive_and_export_are_audited_as_the_operator(database_url: str) -> None:
    """The admin UI publishes archives and downloads the audience too: its entries carry the
    operator, and saving a newsletter without touching its archive adds none."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        admin = await container.admins.find("operator@example.org")
        newsletter = await create_newsletter(client, await admin_headers(container))
        await seed(container, "weekly", 2)
        form = {
            "csrf_token": csrf,
            "slug": "weekly",
            "name": "The Weekly",
            "sender_name": "Editor",
            "sender_address": "editor@example.org",
        }
        saved = await client.post("/admin/newsletters/weekly", data=form)
        assert saved.status_code == 303, saved.text
        assert await container.audit.list(action="newsletter.archive") == []
        published = await client.post("/admin/newsletters/weekly", data=form | {"archive": "on"})
        assert published.status_code == 303, published.text
        exported = await client.get("/admin/subscribers/export")
        assert exported.status_code == 200
        hooked = await client.post(
            "/admin/webhooks",
            data={
                "csrf_token": csrf,
                "url": "https://hooks.example.org/in",
                "event_types": "subscriber.confirmed",
            },
        )
        assert hooked.status_code == 200, hooked.text
        [endpoint] = await container.webhooks.list_endpoints(after_id=None, limit=10)
        entries = await container.audit.list(actor=f"admin:{admin.id}")
        shown = [
            (e.action, e.target, e.detail)
            for e in reversed(entries)
            if e.detail or e.action == "admin.sign_in"
        ]
        assert shown[1:] == [
            (
                "newsletter.archive",
                f"newsletter:{newsletter['id']}",
                {"archive": True, "slug": "weekly"},
            ),
            ("subscribers.export", None, {"rows": 2, "filter": {}}),
            ("webhook.created", f"webhook:{endpoint.id}", {"host": "hooks.example.org"}),
        ]
        assert shown[0][0] == "admin.sign_in"


def test_command_line_archive_export_and_webhook_are_audited(tmp_path: Path) -> None:
    """The server's shell is the third way in: what it publishes, exports and where it sends
    events is in the log as `cli:<login>`, like the API's and the UI's."""
    env = clean_env() | {
        "TIDINGS_DATABASE_URL": f"sqlite:///{tmp_path}/cli.db",
        "TIDINGS_LOG_FORMAT": "json",
    }
    assert tidings("migrate", env=env).returncode == 0
    created = tidings(
        "newsletters", "create", "weekly", "--name", "W", "--sender-name", "E",
        "--sender-address", "editor@example.org", env=env,
    )  # fmt: skip
    assert created.returncode == 0, created.output
    assert tidings("newsletters", "archive", "weekly", env=env).returncode == 0
    exported = tidings("subscribers", "export", "--out", str(tmp_path / "all.csv"), env=env)
    assert exported.returncode == 0, exported.output
    hooked = tidings("webhooks", "create", "https://hooks.example.org/in", "--event", "*", env=env)
    assert hooked.returncode == 0, hooked.output
    listed = tidings("audit", "list", "--json", env=env)
    assert listed.returncode == 0, listed.output
    entries = json.loads(listed.stdout)
    assert [entry["action"] for entry in reversed(entries)] == [
        "newsletter.archive",
        "subscribers.export",
        "webhook.created",
    ]
    assert all(entry["actor"].startswith("cli:") for entry in entries)
