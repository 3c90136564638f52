"""A large campaign's statistics are counted by the workers and read stored (SND-27, issue 36
item 5): its page costs one row however many recipients it had, says when the figures were
counted, and the workers keep them current; the figures are the ones counting the rows gives."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.e2e.test_provider_events import (
    hearing_settings,
    mailgun_event,
    post_event,
    reader,
    send_one,
)
from tests.support.admin_ui import signed_in
from tests.support.sending import studio_with
from tests.support.waiting import wait_for
from tidings.bootstrap import Container
from tidings.devservers.dev_server import DevProviderServer

Studio = tuple[httpx.AsyncClient, Container, dict[str, str], int]


@pytest.fixture
async def studio(database_url: str, dev_provider: DevProviderServer) -> AsyncIterator[Studio]:
    """Four readers sent one campaign, on a site that stores every campaign's statistics
    (as it does above `bulk_email.stored_statistics_above` recipients) and counts them again
    every tenth of a second."""
    settings = hearing_settings(database_url, dev_provider.base_url)
    bulk_email = settings.bulk_email.model_copy(
        update={"stored_statistics_above": 0, "statistics_interval_seconds": 0.1}
    )
    settings = settings.model_copy(update={"bulk_email": bulk_email})
    async with studio_with(settings, 4) as (client, container, headers):
        yield client, container, headers, await send_one(client, container, headers)


async def _stats(client: httpx.AsyncClient, headers: dict[str, str], campaign_id: int) -> dict:
    response = await client.get(f"/api/admin/campaigns/{campaign_id}/stats", headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_a_stored_count_is_read_until_the_workers_count_again(studio: Studio) -> None:
    """The page reads what the workers counted, says when, and the running workers bring it
    up to date on their own: a delivery reported after the count shows after the next one."""
    client, container, headers, campaign_id = studio
    await post_event(client, mailgun_event("delivered", reader(1), campaign_id))
    first = await _stats(client, headers, campaign_id)  # never counted: counted now, stored
    assert first["counted_at"] is not None
    assert first["total"]["sent"] == 4
    assert first["total"]["delivered"] == 1
    await post_event(client, mailgun_event("delivered", reader(2), campaign_id))
    await post_event(client, mailgun_event("complained", reader(3), campaign_id))
    again = await _stats(client, headers, campaign_id)
    assert again["counted_at"] == first["counted_at"]  # the stored count, not a scan
    assert again["total"]["delivered"] == 1

    stop = asyncio.Event()
    workers = asyncio.create_task(container.run_workers(stop))
    try:

        async def recounted() -> dict | None:
            found = await _stats(client, headers, campaign_id)
            return found if found["total"]["delivered"] == 2 else None

        latest = await wait_for(recounted, message="the workers never counted the campaign again")
    finally:
        stop.set()
        await workers
    assert latest["counted_at"] > first["counted_at"]
    assert latest["total"] | {"rates": None} == {
        "sent": 4,
        "delivered": 2,
        "hard_bounced": 0,
        "soft_bounced": 0,
        "complained": 1,
        "unsubscribed": 0,
        "rates": None,
    }
    assert set(latest["segments"]) == {"free", "paid"}

    async with httpx.AsyncClient(
        transport=client._transport, base_url="https://tidings.test"
    ) as browser:
        await signed_in(browser, container)
        page = await browser.get(f"/admin/campaigns/{campaign_id}")
        listing = await browser.get("/admin/campaigns")
    assert "Counted by the workers at" in page.text
    assert "2 (50.0%)" in page.text  # two delivered of four sent
    assert "Deliveries per hour: 2 deliveries over 1 hours" in page.text  # the stored hours
    cells = listing.text.split(f'href="/admin/campaigns/{campaign_id}"', 1)[1].split("</tr>", 1)[0]
    assert 'data-count="2">50.0%' in cells  # the list reads the same stored count


async def test_a_campaign_counted_by_the_workers_has_the_figures_counting_gives(
    studio: Studio,
) -> None:
    """Stored or counted on the spot, a campaign's figures are the same (no drift between the
    two ways of reading them)."""
    client, container, _headers, campaign_id = studio
    for number in (1, 2, 4):
        await post_event(client, mailgun_event("delivered", reader(number), campaign_id))
    await post_event(client, mailgun_event("failed", reader(3), campaign_id, severity="permanent"))
    assert await container.statistics.recount() == 1
    stored = await container.statistics.statistics(campaign_id, timeline=True)
    assert stored.counted_at is not None
    assert await container.statistics.recount() == 0  # counted a moment ago: not due yet
    counted = await container.statistics.count_and_store(campaign_id)
    assert stored.segments.keys() == counted.segments.keys()
    assert {name: vars_of(c) for name, c in stored.segments.items()} == counted.segments
    assert stored.timeline == counted.hourly
    assert sum(n for _, kind, n in stored.timeline if kind == "delivered") == 3


def vars_of(counts: object) -> dict[str, int]:
    return {name: getattr(counts, name) for name in counts.__slots__}  # type: ignore[attr-defined]
