"""No empty or accidental sends (issue 23, item 5): a send to nobody is refused everywhere it
can be asked for, and any campaign can be copied into a new draft — the usual start of the
next issue."""

from __future__ import annotations

import json
import re

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.admin_ui import composed_campaign, signed_in, ui_app
from tests.support.cli import tidings_cli
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    seed,
    wait_for_campaign_status,
    workers,
)

FIELDS = (
    "subject",
    "preheader",
    "body",
    "body_format",
    "audience_filter",
    "sender_name",
    "reply_to",
)


async def test_a_sent_campaign_clones_into_an_editable_draft_with_its_content(
    database_url: str,
) -> None:
    """The clone carries what was written and who it was for, never the send: it is a draft,
    editable, and sending it reaches the readers again only when asked to."""
    async with api_client(make_settings(database_url, queue=FAST_QUEUE)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 3)
        source_id = await create_campaign(client, headers)
        assert (
            await client.post(f"/api/admin/campaigns/{source_id}/send", headers=headers)
        ).status_code == 202
        async with workers(container):
            assert await wait_for_campaign_status(container, source_id) == "submitted"
        cloned = await client.post(f"/api/admin/campaigns/{source_id}/clone", headers=headers)
        missing = await client.post("/api/admin/campaigns/999999/clone", headers=headers)
        source = (await client.get(f"/api/admin/campaigns/{source_id}", headers=headers)).json()
        assert cloned.status_code == 201, cloned.text
        copy = cloned.json()
        assert copy["id"] != source_id
        assert copy["status"] == "draft"
        assert {key: copy[key] for key in FIELDS} == {key: source[key] for key in FIELDS}
        assert source["status"] == "submitted"  # the original is untouched
        edited = await client.patch(
            f"/api/admin/campaigns/{copy['id']}", headers=headers, json={"subject": "Issue 2"}
        )
        assert edited.status_code == 200
        assert await container.sends.get_send(copy["id"]) is None
        assert missing.status_code == 404


async def test_the_cli_refuses_an_empty_send_and_clones(database_url: str) -> None:
    """From a terminal the same rules hold: one line saying nobody would receive it, exit 1,
    nothing queued; `campaign clone` prints the new draft."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        campaign_id = await create_campaign(client, headers)
    tidings = tidings_cli(database_url)
    refused = tidings("campaign", "send", str(campaign_id), "--yes")
    cloned = tidings("campaign", "clone", str(campaign_id), "--json")
    listed = tidings("campaign", "list", "--json")
    assert refused.returncode == 1
    assert "nobody would receive it" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert cloned.returncode == 0, cloned.stderr
    assert '"status": "draft"' in cloned.stdout
    assert listed.stdout.count('"status": "draft"') == 2  # the original stayed a draft


async def test_the_send_button_is_disabled_with_the_reason_for_an_empty_audience(
    database_url: str,
) -> None:
    """An editor sees before clicking that nobody would get it, and why; a posted form (a
    double click, a stale page) is refused the same way and changes nothing."""
    async with ui_app(make_settings(database_url, queue=FAST_QUEUE)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        campaign_url, campaign_id = await composed_campaign(client, container, csrf, 0)
        confirm = await client.get(campaign_url + "/send")
        posted = await client.post(campaign_url + "/send", data={"csrf_token": csrf})
        cloned = await client.post(campaign_url + "/clone", data={"csrf_token": csrf})
        draft = await container.campaigns.get(campaign_id)
    assert re.search(r'<button type="submit" disabled[^>]*>Send to nobody</button>', confirm.text)
    assert "Nobody would receive it" in confirm.text
    assert posted.status_code == 409
    assert "nobody would receive it" in posted.text
    assert draft.campaign.status == "draft"
    assert cloned.status_code == 303
    assert cloned.headers["location"] != campaign_url


async def test_sends_from_the_command_line_are_in_the_audit_log(database_url: str) -> None:
    """Who sent what must not depend on the tool used: a send and a cancel from a terminal
    are recorded as the login that ran them, like the API's and the UI's."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 2)
        campaign_id = await create_campaign(client, headers)
    tidings = tidings_cli(database_url)
    assert tidings("campaign", "send", str(campaign_id), "--yes").returncode == 0
    assert tidings("campaign", "cancel", str(campaign_id), "--yes").returncode == 0
    entries = json.loads(tidings("audit", "list", "--json", "--action", "campaign").stdout)
    # The draft made through the API is its own entry (`campaign.create`, by the key).
    entries = [entry for entry in entries if entry["action"] != "campaign.create"]
    assert [(entry["action"], entry["target"]) for entry in entries] == [
        ("campaign.cancel", f"campaign:{campaign_id}"),
        ("campaign.send", f"campaign:{campaign_id}"),
    ]
    assert all(entry["actor"].startswith("cli:") for entry in entries)
