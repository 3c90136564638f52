"""A sent campaign's opens and clicks where operators read them (ENG-5): `tidings campaign
stats`, the admin API's stats, the campaign page with its chart and link table, and the
campaigns list's rates; and, with tracking off, a plain statement instead of zeros."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import func, select, update

from tests.factories import admin_headers, api_client, make_settings
from tests.support.admin_ui import composed_campaign, signed_in, ui_app
from tests.support.cli import clean_env, tidings
from tests.support.engagement_rows import Counted, add_counters, add_links
from tests.support.sending import FAST_QUEUE, wait_for_campaign_status, workers
from tests.support.tracking import LINKS, click_path, sent_campaign
from tests.support.waiting import wait_for
from tidings.bootstrap import Container
from tidings.domain.tracking import TrackingSigner
from tidings.engagement.apply import apply_all
from tidings.storage.campaign_links import StoredLink
from tidings.storage.tables import campaign_recipients, campaign_sends, engagement_intake

Sent = tuple[httpx.AsyncClient, Container, int, dict[str, str]]
NOT_TRACKED = "Opens and clicks are not tracked for this newsletter"


@pytest.fixture
async def sent(database_url: str) -> AsyncIterator[Sent]:
    """Newsletter `weekly` (tracking off, as created) and one issue sent to four readers,
    free and paid, through the capture provider (which reports no deliveries); an operator
    signed in."""
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with ui_app(settings) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        _, campaign_id = await composed_campaign(client, container, csrf, 4)
        headers = await admin_headers(container)
        answer = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        assert answer.status_code == 202, answer.text
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        yield client, container, campaign_id, headers


async def _counted(container: Container, campaign_id: int, headers: dict[str, str]) -> None:
    """The counters and links some hits would have left, as if the issue had been sent with
    aggregate tracking (the mode a send is prepared under is the one its results show)."""
    async with container.db.write() as conn:
        await conn.execute(
            update(campaign_sends)
            .where(campaign_sends.c.campaign_id == campaign_id)
            .values(tracking="aggregate")
        )
        await add_links(conn, campaign_id, "free", StoredLink(1, "https://example.org/read"))
        await add_links(conn, campaign_id, "paid", StoredLink(1, "https://example.org/read"))
        await add_counters(
            conn,
            campaign_id,
            Counted("free", 0, "open", 2, 5, 2),
            Counted("paid", 0, "open", 1, 1, 2),
            Counted("free", 0, "click", 1, 2, 4),
            Counted("free", 1, "click", 1, 2, 4),
        )


async def _stats_cli(container: Container, campaign_id: int, *options: str) -> str:
    env = clean_env(DATABASE_URL=container.settings.database.url)
    ran = tidings("campaign", "stats", str(campaign_id), *options, env=env)
    assert ran.returncode == 0, ran.output
    return ran.stdout


async def test_stats_json_carries_engagement_from_the_counters(sent: Sent) -> None:
    """Scripts read results from `--json` and the API: both must carry the same engagement
    object, people and machines apart, the links, segments and the denominator named."""
    client, container, campaign_id, headers = sent
    await client.patch(
        "/api/admin/newsletters/weekly", json={"tracking": "aggregate"}, headers=headers
    )
    await _counted(container, campaign_id, headers)
    answer = await client.get(f"/api/admin/campaigns/{campaign_id}/stats", headers=headers)
    assert answer.status_code == 200
    engagement = answer.json()["engagement"]
    assert engagement["tracking"] == "aggregate"
    assert engagement["opens"] == {"human_unique": 3, "human_total": 6, "machine_total": 4}
    assert engagement["clicks"] == {"human_unique": 1, "human_total": 2, "machine_total": 4}
    assert engagement["links"] == [
        {"url": "https://example.org/read", "human_unique": 1, "human_total": 2, "machine_total": 4}
    ]
    assert set(engagement["segments"]) == {"free", "paid"}
    assert engagement["rates"] == {  # capture reports no deliveries: shares of the 4 sent
        "denominator": "sent",
        "denominator_count": 4,
        "open_rate": 0.75,
        "click_through_rate": 0.25,
    }
    printed = await _stats_cli(container, campaign_id, "--json")
    assert json.loads(printed.strip().splitlines()[-1]) == answer.json()
    text = await _stats_cli(container, campaign_id)
    assert "machines: privacy proxies and security scanners, counted apart" in text
    assert "https://example.org/read" in text
    assert "open rate 75.0%, click-through rate 25.0%" in text


async def test_click_through_rate_divides_by_delivered_once_deliveries_are_reported(
    sent: Sent,
) -> None:
    """With a provider that reports deliveries, mail that never arrived must not dilute the
    rate: the denominator becomes delivered, and says so."""
    client, container, campaign_id, headers = sent
    await _counted(container, campaign_id, headers)
    async with container.db.write() as conn:
        delivered = (
            update(campaign_recipients)
            .where(campaign_recipients.c.campaign_id == campaign_id)
            .values(delivered_at=campaign_recipients.c.updated_at)
        )
        await conn.execute(delivered.where(campaign_recipients.c.id % 2 == 0))
    answer = await client.get(f"/api/admin/campaigns/{campaign_id}/stats", headers=headers)
    rates = answer.json()["engagement"]["rates"]
    assert rates["denominator"] == "delivered"
    assert rates["denominator_count"] == answer.json()["total"]["delivered"] == 2
    assert rates["click_through_rate"] == 0.5


async def test_tracking_off_says_so_instead_of_showing_zeros(sent: Sent) -> None:
    """A newsletter that does not track has no open rate, not an open rate of 0%: every view
    says it is not tracked and how to turn it on."""
    client, container, campaign_id, headers = sent
    answer = await client.get(f"/api/admin/campaigns/{campaign_id}/stats", headers=headers)
    assert answer.json()["engagement"] == {"tracking": "off"}
    text = await _stats_cli(container, campaign_id)
    assert NOT_TRACKED in text
    assert "tidings newsletters tracking SLUG aggregate" in text
    # Nor is a delivery rate that was never reported a 0.0% (a plain relay reports none).
    # (the table wraps the cell; each segment's row and the total's say it)
    assert text.count("reported") >= 2
    page = await client.get(f"/admin/campaigns/{campaign_id}")
    assert NOT_TRACKED in page.text
    assert "tidings newsletters tracking weekly aggregate" in page.text
    assert "Clicks per link" not in page.text
    listed = await client.get("/admin/campaigns")
    row = _list_row(listed.text, campaign_id)
    assert row.count('data-field="not-tracked">—</td>') == 2


async def test_campaign_page_shows_rates_chart_and_link_table(sent: Sent) -> None:
    """The page is where an author looks first: the same figures as the CLI, a chart over
    time and a table of clicks per link, machines apart."""
    client, container, campaign_id, headers = sent
    await _counted(container, campaign_id, headers)
    page = await client.get(f"/admin/campaigns/{campaign_id}")
    assert page.status_code == 200
    html = page.text
    assert NOT_TRACKED not in html
    assert 'data-field="open-rate">75.0%' in html
    assert 'data-field="click-rate">25.0%' in html
    assert "Clicks per link" in html
    assert '<table data-field="links">' in html
    assert "<td><code>https://example.org/read</code></td>" in html
    assert 'aria-label="People opening per hour: 3 first opens over 1 hours' in html
    assert "People clicking per hour" in html
    listed = await client.get("/admin/campaigns")
    row = _list_row(listed.text, campaign_id)
    assert 'data-field="engagement">75.0%</td>' in row
    assert 'data-field="engagement">25.0%</td>' in row


async def test_campaigns_list_says_not_reported_instead_of_zero_delivered(sent: Sent) -> None:
    """A plain SMTP relay reports bounces at most, never deliveries: "Delivered 0.0%" would
    read as a disaster that did not happen."""
    client, container, campaign_id, _ = sent
    async with container.db.write() as conn:
        await conn.execute(
            update(campaign_recipients)
            .where(campaign_recipients.c.campaign_id == campaign_id)
            .where(campaign_recipients.c.id % 4 == 0)
            .values(bounce_kind="hard")
        )
    listed = await client.get("/admin/campaigns")
    row = _list_row(listed.text, campaign_id)
    assert 'data-field="delivered">not reported</td>' in row
    assert "0.0%</td>" not in row.split('data-field="delivered"')[0]
    assert "25.0%" in row  # one of four bounced, still shown as a rate


def _list_row(html: str, campaign_id: int) -> str:
    start = html.index(f'<a href="/admin/campaigns/{campaign_id}">')
    return html[start : html.index("</tr>", start)]


async def test_hits_through_the_real_endpoints_show_in_the_stats(database_url: str) -> None:
    """The figures must be the ones the intake and the applier leave: a person's open and two
    clicks, a HEAD on the pixel and a click on the hidden link (machines') — each in its place."""
    sent_at = datetime.now(UTC) - timedelta(hours=1)
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        campaign_id = (
            await sent_campaign(container.db, readers=2, mode="aggregate", now=sent_at)
        ).campaign_id
        signer = TrackingSigner(container.site_secret())
        person = signer.message_token(campaign_id, sent_at)
        other = signer.message_token(campaign_id, sent_at)
        browser = {"user-agent": "Mozilla/5.0 (X11; Linux x86_64; rv:124.0) Firefox/124.0"}
        pixel = await client.get(click_path(signer, campaign_id, 0, person), headers=browser)
        assert pixel.status_code == 200
        for _ in range(2):
            click = await client.get(click_path(signer, campaign_id, 1, person), headers=browser)
            assert click.status_code in (302, 303)
        await client.head(click_path(signer, campaign_id, 0, other), headers=browser)
        await client.get(click_path(signer, campaign_id, 4, other), headers=browser)  # hidden
        await wait_for(lambda: _intake_count(container, 5), message="hits never recorded")
        await apply_all(container.db)
        answer = await client.get(f"/api/admin/campaigns/{campaign_id}/stats", headers=headers)
    engagement = answer.json()["engagement"]
    assert engagement["opens"] == {"human_unique": 1, "human_total": 1, "machine_total": 1}
    assert engagement["clicks"] == {"human_unique": 1, "human_total": 2, "machine_total": 1}
    assert [(link["url"], link["human_total"]) for link in engagement["links"]] == [
        (LINKS[1].url, 2),
        (LINKS[2].url, 0),
        (LINKS[3].url, 0),
    ]
    assert engagement["rates"]["denominator"] == "sent"
    assert engagement["rates"]["denominator_count"] == answer.json()["total"]["sent"]


async def _intake_count(container: Container, at_least: int) -> bool:
    async with container.db.read() as conn:
        count = (await conn.execute(select(func.count()).select_from(engagement_intake))).scalar()
    return int(count or 0) >= at_least
