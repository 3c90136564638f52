"""Sends, cancels, deletes and imports are in the audit log with who did them, from where
(UI-2): through the API as the key, through the UI as the operator; refusals are not."""

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.admin_ui import signed_in, ui_app
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
