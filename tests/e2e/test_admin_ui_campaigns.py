"""The admin UI's campaign pages drive the real send: editor and previews, test send, the
confirmation with the preflight count, progress, the verification summary (UI-1)."""

import re
from datetime import UTC, datetime

from tests.factories import make_settings
from tests.support.admin_ui import BODY, DRAFT, composed_campaign, signed_in, ui_app
from tests.support.sending import (
    FAST_QUEUE,
    batch_provider_settings,
    wait_for_campaign_status,
    workers,
)
from tidings.devservers.dev_faults import Fault
from tidings.devservers.dev_server import DevProviderServer


async def test_a_campaign_is_composed_previewed_and_sent_from_the_browser(
    database_url: str,
) -> None:
    """The whole send must be doable without the CLI or the API, and the confirmation must
    state how many readers it reaches before anything leaves."""
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with ui_app(settings) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        campaign_url, campaign_id = await composed_campaign(client, container, csrf, 6)
        editor = await client.get(campaign_url)
        assert editor.text.count("<iframe") == 1  # one frame; tabs choose segment and width
        assert 'title="free version at desktop width"' in editor.text
        tabbed = await client.get(campaign_url, params={"segment": "paid", "width": "phone"})
        assert 'title="paid version at phone width"' in tabbed.text
        assert 'class="preview-frame preview-phone"' in tabbed.text
        live = await client.post(
            campaign_url,
            data={**DRAFT, "subject": "Issue one", "csrf_token": csrf},
            headers={"Accept": "application/json"},
        )
        assert live.json()["saved"] is True
        paid = await client.get(campaign_url + "/preview", params={"segment": "paid"})
        free = await client.get(campaign_url + "/preview", params={"segment": "free"})
        assert "Members only." in paid.text
        assert "Members only." not in free.text
        assert "sandbox" in paid.headers["content-security-policy"]
        broken = await client.post(
            campaign_url,
            data={**DRAFT, "body": "::: only gold\nx\n:::\n", "csrf_token": csrf},
            headers={"Accept": "application/json"},
        )
        assert broken.status_code == 422
        assert "unknown segments" in broken.json()["error"]
        async with workers(container):  # "Test sent" only once a worker handed it over
            tested = await client.post(
                campaign_url + "/test-send",
                data={"to": "me@example.org", "segment": "paid", "csrf_token": csrf},
            )
        assert "Test sent to 1 address" in tested.text
        test_copy = await client.get("/admin/outbox")
        assert "[Test] Issue one" in test_copy.text  # never taken for the issue itself
        confirm = await client.get(campaign_url + "/send")
        assert re.search(r'data-testid="preflight">6<', confirm.text)
        sent = await client.post(campaign_url + "/send", data={"csrf_token": csrf})
        assert sent.status_code == 303
        clicked_twice = await client.post(campaign_url + "/send", data={"csrf_token": csrf})
        assert clicked_twice.status_code == 303  # the double-click lands on the send's page
        assert clicked_twice.headers["location"] == campaign_url
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        send = await container.sends.get_send(campaign_id)
        assert send is not None
        assert send.attempt == 1  # sent once
        progress = (await client.get(campaign_url + "/progress")).json()
        assert progress["done"] is True
        assert progress["completed"] == progress["total"] == 6
        done = await client.get(campaign_url)
        assert "Verification" in done.text
        assert "<dt>Sent</dt><dd>6</dd>" in done.text
        assert 'class="badge" data-field="stage">sent</span>' in done.text  # not "submitted"
        assert re.search(r'data-field="started">\d{4}-\d\d-\d\d \d\d:\d\d UTC<', done.text)
        assert re.search(r'data-field="finished">\d{4}-\d\d-\d\d \d\d:\d\d UTC<', done.text)
        assert re.search(r'data-field="took">\d+ (s|min \d+ s)<', done.text)
        assert 'title="free version at desktop width"' in done.text  # what was sent
        assert 'href="?segment=paid&amp;width=desktop"' in done.text
        listing = await client.get("/admin/campaigns")
        row = listing.text.split(f'href="{campaign_url}"', 1)[1].split("</tr>", 1)[0]
        assert "<td>Weekly Notes</td>" in row
        assert '<td class="num">6</td>' in row  # its audience
        assert re.search(r"<td>\d{4}-\d\d-\d\d \d\d:\d\d UTC</td>", row)  # sent date
        assert '<span class="badge">sent</span>' in row
        assert row.count('<td class="num">—</td>') == 3  # no rates before the provider reports
        sent_list = await client.get(campaign_url, params={"state": "sent"})
        assert sent_list.text.count("<code>&lt;") == 6  # six Message-IDs, escaped
        outbox = await client.get("/admin/outbox")
        assert "Issue one" in outbox.text


async def test_a_failed_send_shows_its_reason_and_is_retried_from_the_page(
    sqlite_url: str, dev_provider: DevProviderServer
) -> None:
    """An operator facing a failure must see why and whether a retry is safe, and retry it."""
    settings = batch_provider_settings(sqlite_url, dev_provider.base_url, batch_size=2)
    dev_provider.faults.replace([Fault(action="status", status=400, times=1)])
    async with ui_app(settings) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        campaign_url, campaign_id = await composed_campaign(client, container, csrf, 4)
        await client.post(campaign_url + "/send", data={"csrf_token": csrf})
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "failed"
            failed = await client.get(campaign_url)
            assert "The send failed while submitting" in failed.text
            assert "<code>batch_failed</code>" in failed.text
            assert "Retry is safe" in failed.text
            retried = await client.post(campaign_url + "/retry", data={"csrf_token": csrf})
            assert retried.status_code == 303
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        done = await client.get(campaign_url)
        assert "<dt>Sent</dt><dd>4</dd>" in done.text
        again = await client.post(campaign_url + "/retry", data={"csrf_token": csrf})
        assert again.status_code == 409  # nothing failed any more: refused, page says why


async def test_a_refused_save_shows_everything_typed_and_marks_the_field(database_url: str) -> None:
    """An operator who typed a long issue and made one mistake must get every word back, with
    the mistake pointed at, never the stored version (their text would be gone)."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        campaign_url, _ = await composed_campaign(client, container, csrf, 1)
        typed = "A long new paragraph I must not lose.\n\n::: only gold\nx\n:::\n"
        refused = await client.post(
            campaign_url,
            data={**DRAFT, "subject": "Typed subject", "body": typed, "csrf_token": csrf},
        )
        assert refused.status_code == 422
        assert "A long new paragraph I must not lose." in refused.text
        assert 'value="Typed subject"' in refused.text
        assert re.search(
            r'<textarea id="body" name="body" required aria-invalid="true" '
            r'aria-describedby="body-error">',
            refused.text,
        )
        assert re.search(
            r'<p class="field-error" id="body-error">[^<]*unknown segments', refused.text
        )
        stored = await container.campaigns.get(int(campaign_url.rsplit("/", 1)[1]))
        assert stored.campaign.body == BODY  # nothing half-saved
        autosaved = await client.post(
            campaign_url,
            data={**DRAFT, "body": typed, "csrf_token": csrf},
            headers={"Accept": "application/json"},
        )
        assert autosaved.status_code == 422
        assert autosaved.json()["field"] == "body"  # the script marks the field too
        new = await client.post(
            "/admin/campaigns/new",
            data={**DRAFT, "subject": "Fresh", "body": typed, "newsletter": "weekly",
                  "csrf_token": csrf},
        )  # fmt: skip
        assert new.status_code == 422
        assert "A long new paragraph I must not lose." in new.text
        assert 'value="Fresh"' in new.text
        assert '<option value="weekly" selected>' in new.text


async def test_scheduling_reads_and_shows_the_sites_time_zone(sqlite_url: str) -> None:
    """An editor in Paris types 09:00 meaning 09:00 in Paris: read in UTC the issue would go
    out an hour or two early. A bad time comes back with what was typed, marked."""
    settings = make_settings(sqlite_url, site={"timezone": "Europe/Paris"})
    async with ui_app(settings) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        campaign_url, campaign_id = await composed_campaign(client, container, csrf, 1)
        editor = await client.get(campaign_url)
        assert '<option value="Europe/Paris" selected>Europe/Paris (the site\'s)</option>' in (
            editor.text
        )
        bad = await client.post(
            campaign_url + "/schedule",
            data={"scheduled_at": "next friday", "zone": "Europe/Paris", "csrf_token": csrf},
        )
        assert bad.status_code == 422
        assert 'value="next friday" aria-invalid="true"' in bad.text
        assert 'id="scheduled_at-error"' in bad.text
        elsewhere = await client.post(
            campaign_url + "/schedule",
            data={"scheduled_at": "2030-06-01T09:00", "zone": "Asia/Tokyo", "csrf_token": csrf},
        )
        assert elsewhere.status_code == 422  # only the site's zone or UTC
        scheduled = await client.post(
            campaign_url + "/schedule",
            data={"scheduled_at": "2030-06-01T09:00", "zone": "Europe/Paris", "csrf_token": csrf},
        )
        assert scheduled.status_code == 303
        draft = await container.campaigns.get(campaign_id)
        assert draft.campaign.scheduled_at == datetime(2030, 6, 1, 7, 0, tzinfo=UTC)
        shown = await client.get(campaign_url)
        assert "scheduled for 2030-06-01 09:00 Europe/Paris, 07:00 UTC" in shown.text
        listing = await client.get("/admin/campaigns")
        assert "scheduled for 2030-06-01 09:00 Europe/Paris, 07:00 UTC" in listing.text
