"""The admin UI's campaign pages drive the real send: editor and previews, test send, the
confirmation with the preflight count, progress, the verification summary (UI-1)."""

import re

from tests.factories import make_settings
from tests.support.admin_ui import DRAFT, composed_campaign, signed_in, ui_app
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
        assert editor.text.count("<iframe") == 6  # free, paid and comped; desktop and mobile
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
        confirm = await client.get(campaign_url + "/send")
        assert re.search(r'data-testid="preflight">6<', confirm.text)
        sent = await client.post(campaign_url + "/send", data={"csrf_token": csrf})
        assert sent.status_code == 303
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        progress = (await client.get(campaign_url + "/progress")).json()
        assert progress["done"] is True
        assert progress["completed"] == progress["total"] == 6
        done = await client.get(campaign_url)
        assert "Verification" in done.text
        assert "<dt>Sent</dt><dd>6</dd>" in done.text
        sent_list = await client.get(campaign_url, params={"state": "sent"})
        assert sent_list.text.count("<code>&lt;") == 6  # six Message-IDs, escaped
        outbox = await client.get("/admin/outbox")
        assert "Issue one" in outbox.text


async def test_a_failed_send_shows_its_reason_and_is_retried_from_the_page(
    sqlite_url: str, dev_provider: DevProviderServer
) -> None:
    """An operator facing a failure must see why and whether a retry is safe, and retry it."""
    settings = batch_provider_settings(sqlite_url, dev_provider.base_url, batch_size=2)
    dev_provider.faults.replace([Fault(action="status", status=401, times=1)])
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
