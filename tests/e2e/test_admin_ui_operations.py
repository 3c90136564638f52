"""The admin UI's operations pages: webhook endpoints with their delivery log and replay, and
a campaign scheduled, cancelled and reconciled from its pages (UI-1)."""

from datetime import timedelta

from sqlalchemy import select

from tests.factories import make_settings
from tests.support.admin_ui import composed_campaign, signed_in, ui_app
from tests.support.sending import batch_provider_settings, wait_for_campaign_status, workers
from tidings.devservers.dev_faults import Fault
from tidings.devservers.dev_server import DevProviderServer
from tidings.storage.tables import campaign_batches


async def test_webhook_secret_is_shown_once_and_deliveries_replay(database_url: str) -> None:
    """The signing secret can only be copied at creation, and a failed delivery must be
    findable in the log and sent again from it."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        refused = await client.post(
            "/admin/webhooks",
            data={"url": "ftp://x", "event_types": "*", "csrf_token": csrf},
        )
        assert refused.status_code == 422
        assert "url must be an absolute http(s) URL" in refused.text
        created = await client.post(
            "/admin/webhooks",
            data={
                "url": "https://hooks.example.org/tidings",
                "event_types": ["subscriber.created", "subscriber.deleted"],
                "description": "CRM",
                "csrf_token": csrf,
            },
        )
        (endpoint,) = await container.webhooks.list_endpoints(after_id=None, limit=10)
        assert endpoint.secret in created.text
        listing = await client.get("/admin/webhooks")
        assert endpoint.secret not in listing.text
        assert "subscriber.created, subscriber.deleted" in listing.text
        tested = await client.post(f"/admin/webhooks/{endpoint.id}/test", data={"csrf_token": csrf})
        assert tested.status_code == 303
        log = await client.get(f"/admin/webhooks/{endpoint.id}")
        (delivery,) = await container.webhooks.list_deliveries(
            endpoint.id, before_id=None, limit=10
        )
        assert delivery.event_id in log.text
        replayed = await client.post(
            f"/admin/webhooks/deliveries/{delivery.id}/replay", data={"csrf_token": csrf}
        )
        assert replayed.status_code == 303
        assert replayed.headers["location"] == f"/admin/webhooks/{endpoint.id}"


async def test_a_campaign_is_scheduled_and_cancelled_from_its_page(database_url: str) -> None:
    """A scheduled send must be visible on the draft and stoppable before it goes."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        campaign_url, campaign_id = await composed_campaign(client, container, csrf, 2)
        when = (container.clock() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
        scheduled = await client.post(
            campaign_url + "/schedule", data={"scheduled_at": when, "csrf_token": csrf}
        )
        assert scheduled.status_code == 303
        page = await client.get(campaign_url)
        assert "scheduled for" in page.text
        assert (await container.campaigns.get(campaign_id)).campaign.status == "scheduled"
        bad = await client.post(
            campaign_url + "/schedule", data={"scheduled_at": "tomorrow", "csrf_token": csrf}
        )
        assert bad.status_code == 422
        cancelled = await client.post(
            campaign_url + "/cancel", data={"csrf_token": csrf, "confirmed": "yes"}
        )
        assert cancelled.status_code == 303
        assert (await container.campaigns.get(campaign_id)).campaign.status == "cancelled"


async def test_a_batch_of_unknown_outcome_is_reconciled_from_the_campaign_page(
    sqlite_url: str, dev_provider: DevProviderServer
) -> None:
    """After a lost answer only the operator knows what the provider got: the failed page must
    say a retry is not safe yet, and take their answer so the send can finish."""
    settings = batch_provider_settings(sqlite_url, dev_provider.base_url)
    dev_provider.faults.replace([Fault(action="drop_after_accept", times=1)])
    async with ui_app(settings) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        campaign_url, campaign_id = await composed_campaign(client, container, csrf, 4)
        await client.post(campaign_url + "/send", data={"csrf_token": csrf})
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "failed"
            failed = await client.get(campaign_url)
            assert "Retry is not safe now" in failed.text
            async with container.db.read() as conn:
                (batch_id,) = (
                    await conn.execute(
                        select(campaign_batches.c.id).where(
                            campaign_batches.c.campaign_id == campaign_id,
                            campaign_batches.c.status == "submitting",
                        )
                    )
                ).scalars()
            wrong = await client.post(
                campaign_url + "/reconcile",
                data={"batch_id": "999", "outcome": "submitted", "note": "x", "csrf_token": csrf},
            )
            assert wrong.status_code == 409
            done = await client.post(
                campaign_url + "/reconcile",
                data={
                    "batch_id": str(batch_id),
                    "outcome": "submitted",
                    "note": "found all four Message-IDs in the provider's log",
                    "csrf_token": csrf,
                },
            )
            assert done.status_code == 303
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        finished = await client.get(campaign_url)
        assert "<dt>Sent</dt><dd>4</dd>" in finished.text
