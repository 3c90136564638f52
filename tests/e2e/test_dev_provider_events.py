"""`tidings dev-provider` plays Mailgun's other side (PRV-4, PRV-6): it posts signed events
back for what it accepted — delivered for most readers, a bounce or a complaint for the local
parts you choose — so the whole loop runs on one machine before any provider key exists."""

from __future__ import annotations

from sqlalchemy import select

from tests.e2e.audience_helpers import create_newsletter
from tests.e2e.test_provider_events import KEY, hearing_settings
from tests.factories import admin_headers, api_client
from tests.support.sending import (
    create_campaign,
    registry,
    running,
    wait_for,
    wait_for_campaign_status,
)
from tidings.devservers.dev_events import events_for
from tidings.devservers.dev_server import DevProviderServer
from tidings.storage.tables import subscribers, suppressions

READERS = ("ann@example.test", "bounce-bob@example.test", "complain-cy@example.test")


async def test_a_campaign_hears_back_from_the_dev_provider(
    database_url: str, dev_provider: DevProviderServer
) -> None:
    """A send through the dev provider comes back as signed events: the `bounce-` reader is
    suppressed for a hard bounce, the `complain-` reader for a complaint, and the campaign's
    statistics show all three outcomes."""
    settings = hearing_settings(database_url, dev_provider.base_url)
    async with api_client(settings) as (client, container):
        poster = dev_provider.post_events_to(
            "http://tidings.test/api/events/mailgun", KEY, transport=client._transport
        )
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        for address in READERS:
            body = {
                "email": address,
                "subscriptions": [{"newsletter": "weekly", "confirmed": True}],
            }
            created = await client.post("/api/admin/subscribers", json=body, headers=headers)
            assert created.status_code == 201, created.text
        campaign_id = await create_campaign(client, headers)
        sent = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        assert sent.status_code == 202, sent.text
        async with running(container, registry(container)):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        await poster.drain()
        assert dict(poster.stats) == {"posted": 4}  # three delivered-or-bounced, one complaint
        stats_url = f"/api/admin/campaigns/{campaign_id}/stats"

        async def counted() -> dict[str, int] | None:
            total = (await client.get(stats_url, headers=headers)).json()["total"]
            return total if total["complained"] == 1 else None

        total = await wait_for(counted, within_seconds=10)
        async with container.db.read() as conn:
            query = select(subscribers.c.email, suppressions.c.reason).join(
                suppressions, suppressions.c.email_hash == subscribers.c.email_hash
            )
            suppressed = {row.email: row.reason for row in await conn.execute(query)}
    assert suppressed == {
        "bounce-bob@example.test": "hard_bounce",
        "complain-cy@example.test": "complaint",
    }
    assert {key: total[key] for key in ("sent", "delivered", "hard_bounced", "complained")} == {
        "sent": 3,
        "delivered": 2,
        "hard_bounced": 1,
        "complained": 1,
    }


def test_the_local_part_chooses_the_events() -> None:
    """Developers pick outcomes by address; the prefixes must mean what the docs say."""
    assert [e[0] for e in events_for("ann@example.test")] == ["delivered"]
    assert events_for("Bounce-x@example.test")[0][:3] == ("failed", "permanent", 550)
    assert events_for("softbounce-x@example.test")[0][:2] == ("failed", "temporary")
    assert [e[0] for e in events_for("complain-x@example.test")] == ["delivered", "complained"]
