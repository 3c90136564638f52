"""Mailgun event webhooks and the generic event form (PRV-6, AUD-13): a campaign sent through
the Mailgun-compatible dev provider hears back — bounces and complaints suppress, each
recipient row learns its outcome — and forged, stale, replayed or malformed input changes
nothing it should not."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError

from tests.e2e.audience_helpers import snapshot
from tests.factories import api_client, make_settings
from tests.support.admin_ui import signed_in
from tests.support.cli import Ran, clean_env, tidings
from tests.support.sending import (
    batch_provider_settings,
    create_campaign,
    registry,
    running,
    studio_with,
    wait_for_campaign_status,
)
from tidings.bootstrap import Container
from tidings.config import Settings
from tidings.delivery.mailgun_events import event_data, signed_body
from tidings.devservers.dev_server import DevProviderServer
from tidings.domain.email_headers import message_id
from tidings.storage.tables import (
    address_history,
    campaign_recipients,
    inbound_events,
    subscribers,
    subscriptions,
    suppressions,
    webhook_deliveries,
)

KEY = "whsec-test-signing-key"
DOMAIN = "mg.example.org"
Studio = tuple[httpx.AsyncClient, Container, dict[str, str], int]


def hearing_settings(database_url: str, base_url: str) -> Settings:
    """Campaigns through the dev provider, its events signed with KEY; two soft bounces
    suppress."""
    base = batch_provider_settings(database_url, base_url)
    sections = {name: getattr(base, name).model_dump() for name in ("queue", "email", "theme")}
    return make_settings(
        database_url,
        **sections,
        site={"public_url": str(base.site.public_url)},
        mailgun={
            **base.mailgun.model_dump(mode="json"),
            "api_key": "key-test",
            "webhook_signing_key": KEY,
        },
        bulk_email={"batch_size": 40},
        inbound={"soft_bounce_limit": 2},
    )


@pytest.fixture
async def studio(database_url: str, dev_provider: DevProviderServer) -> AsyncIterator[Studio]:
    """Four readers of `weekly` (two newsletters each) sent one campaign through Mailgun."""
    settings = hearing_settings(database_url, dev_provider.base_url)
    async with studio_with(settings, 4) as (client, container, headers):
        await container.webhooks.create_endpoint("https://hooks.example.org/x", ["*"])
        yield client, container, headers, await send_one(client, container, headers)


async def send_one(client: httpx.AsyncClient, container: Container, headers: dict[str, str]) -> int:
    """Create a campaign to the whole of `weekly`, send it and wait until it is submitted."""
    campaign_id = await create_campaign(client, headers)
    response = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
    assert response.status_code == 202, response.text
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    return campaign_id


def reader(number: int) -> str:
    return f"reader-{number}@example.test"


def mailgun_event(
    event: str,
    address: str,
    campaign_id: int | None,
    *,
    at: datetime | None = None,
    event_id: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return event_data(
        event,
        address,
        event_id=event_id or uuid.uuid4().hex,
        occurred_at=at or datetime.now(UTC),
        message_id=message_id(str(campaign_id), address, DOMAIN) if campaign_id else None,
        **extra,
    )


def reported(event: str, address: str, *, message: str) -> dict[str, Any]:
    """An event as the provider reports it: `address` as it spells it, `message` the ID."""
    return event_data(
        event, address, event_id=uuid.uuid4().hex, occurred_at=datetime.now(UTC), message_id=message
    )


async def post_event(
    client: httpx.AsyncClient, data: dict[str, Any], *, key: str = KEY, **signing: Any
) -> httpx.Response:
    body = signed_body(key, data, now=signing.pop("now", datetime.now(UTC)), **signing)
    return await client.post(
        "/api/events/mailgun", content=body, headers={"content-type": "application/json"}
    )


async def invoke_cli(container: Container, *args: str) -> Ran:
    """`tidings ARGS` on the studio's database, on a thread while the app keeps serving."""
    env = clean_env(DATABASE_URL=container.settings.database.url, LOG_FORMAT="json")
    return await asyncio.to_thread(tidings, *args, env=env)


async def recipient_row(container: Container, campaign_id: int, address: str) -> Any:
    query = (
        select(campaign_recipients)
        .join(subscribers, subscribers.c.id == campaign_recipients.c.subscriber_id)
        .where(campaign_recipients.c.campaign_id == campaign_id, subscribers.c.email == address)
    )
    async with container.db.read() as conn:
        return (await conn.execute(query)).one()


async def suppression_of(container: Container, address: str) -> str | None:
    query = (
        select(suppressions.c.reason)
        .join(subscribers, subscribers.c.email_hash == suppressions.c.email_hash)
        .where(subscribers.c.email == address)
    )
    async with container.db.read() as conn:
        return (await conn.execute(query)).scalar()


async def webhook_events(container: Container) -> list[str]:
    async with container.db.read() as conn:
        query = select(webhook_deliveries.c.event_type).order_by(webhook_deliveries.c.id)
        return [str(name) for name in (await conn.execute(query)).scalars()]


async def test_a_hard_bounce_suppresses_the_address_and_marks_its_recipient_row(
    studio: Studio,
) -> None:
    """A dead mailbox must never be mailed again (AUD-8), and the campaign must show who
    bounced and with what code (SND-27); a retry of the same event changes nothing."""
    client, container, _headers, campaign_id = studio
    data = mailgun_event("failed", reader(1), campaign_id, severity="permanent", code=550)
    response = await post_event(client, data)
    assert response.status_code == 200, response.text
    assert response.json() == {"outcome": "applied"}
    row = await recipient_row(container, campaign_id, reader(1))
    assert (row.bounce_kind, row.bounce_code) == ("hard", "550")
    assert await suppression_of(container, reader(1)) == "hard_bounce"
    assert await suppression_of(container, reader(2)) is None
    assert {"subscriber.bounced", "subscriber.suppressed"} <= set(await webhook_events(container))
    before = await snapshot(container)
    again = await post_event(client, data)  # Mailgun retries: same event id, fresh signature
    assert again.json() == {"outcome": "duplicate"}
    assert await snapshot(container) == before


async def test_a_complaint_suppresses_and_unsubscribes_everywhere(studio: Studio) -> None:
    """Someone who reported us as spam wants nothing from any newsletter (AUD-13)."""
    client, container, _headers, campaign_id = studio
    response = await post_event(client, mailgun_event("complained", reader(2), campaign_id))
    assert response.json() == {"outcome": "applied"}
    assert await suppression_of(container, reader(2)) == "complaint"
    row = await recipient_row(container, campaign_id, reader(2))
    assert row.complained_at is not None
    query = (
        select(subscriptions.c.unsubscribed_at)
        .join(subscribers, subscribers.c.id == subscriptions.c.subscriber_id)
        .where(subscribers.c.email == reader(2))
    )
    async with container.db.read() as conn:
        left = list((await conn.execute(query)).scalars())
        history = list((await conn.execute(select(address_history.c.decision))).scalars())
    assert left
    assert all(at is not None for at in left)
    assert any(decision.startswith("suppressed:complaint") for decision in history)
    assert "subscriber.complained" in await webhook_events(container)


async def test_soft_bounces_suppress_after_the_limit_and_a_later_delivery_lifts_it(
    studio: Studio,
) -> None:
    """A full mailbox twice within the window suppresses (limit 2 here); a delivery reported
    after them shows the mailbox works again, whatever order the events came in."""
    client, container, _headers, campaign_id = studio
    start = datetime.now(UTC) - timedelta(hours=3)
    delivered = mailgun_event("delivered", reader(3), campaign_id, at=start + timedelta(hours=2))
    first = mailgun_event(
        "failed", reader(3), campaign_id, at=start, severity="temporary", code=452
    )
    second = mailgun_event(
        "failed", reader(3), campaign_id, at=start + timedelta(hours=1), severity="temporary"
    )
    await post_event(client, first)
    assert await suppression_of(container, reader(3)) is None
    await post_event(client, second)
    assert await suppression_of(container, reader(3)) == "soft_bounce"
    await post_event(client, delivered)
    assert await suppression_of(container, reader(3)) is None
    row = await recipient_row(container, campaign_id, reader(3))
    assert row.delivered_at is not None
    assert (row.bounce_kind, row.bounce_code) == ("soft", None)  # the latest soft bounce wins


async def test_forged_stale_and_replayed_signatures_are_refused_and_change_nothing(
    studio: Studio,
) -> None:
    """Anyone can reach the webhook URL: only the provider's signed, fresh, first-time
    requests may suppress a reader (PRV-6)."""
    client, container, _headers, campaign_id = studio
    bounce = mailgun_event("failed", reader(4), campaign_id, severity="permanent")
    before = await snapshot(container)
    forged = await post_event(client, bounce, key="not-the-key")
    assert forged.status_code == 401
    assert forged.json()["code"] == "signature_rejected"
    stale = await post_event(client, bounce, now=datetime.now(UTC) - timedelta(hours=2))
    assert stale.status_code == 401
    assert await snapshot(container) == before
    delivered = mailgun_event("delivered", reader(4), campaign_id)
    assert (await post_event(client, delivered, token="t" * 50)).status_code == 200
    replay = await post_event(client, bounce, token="t" * 50)  # a captured token, new event
    assert replay.status_code == 409
    assert replay.json()["code"] == "event_replayed"
    assert await suppression_of(container, reader(4)) is None


async def test_malformed_oversized_and_unknown_input_is_answered_without_harm(
    studio: Studio,
) -> None:
    """A signed body tidings cannot read is kept for the operator; junk and oversized bodies
    are refused; an address that is no subscriber is counted and changes nothing."""
    client, container, headers, _campaign_id = studio
    before = await snapshot(container)
    unreadable = await post_event(client, {"event": "failed"})  # signed, but no id/timestamp
    assert unreadable.json() == {"outcome": "unparsed"}
    junk = await client.post(
        "/api/events/mailgun",
        content=b"\xff{not json",
        headers={"content-type": "application/json"},
    )
    assert junk.status_code == 422
    big = await client.post(
        "/api/events/mailgun",
        content=b"{" + b" " * 300_000 + b"}",
        headers={"content-type": "application/json"},
    )
    assert big.status_code == 413
    stranger = mailgun_event("failed", "nobody@example.test", None, severity="permanent")
    assert (await post_event(client, stranger)).json() == {"outcome": "unmatched"}
    assert await snapshot(container) == before
    listed = await client.get("/api/admin/events?status=unparsed", headers=headers)
    assert listed.status_code == 200
    [item] = listed.json()["items"]
    assert "event-data.id" in item["diagnostic"]
    assert '"event": "failed"' in item["payload"]
    metrics = container.metrics.render().decode()
    counted = (
        'tidings_inbound_events_total{kind="hard_bounce",outcome="unmatched",source="mailgun"}'
    )
    assert f"{counted} 1.0" in metrics


async def test_an_event_that_cannot_be_stored_is_answered_500_and_counted(studio: Studio) -> None:
    """An event the database cannot take (here its table is gone) must reach the provider as
    a 500, so it retries, and the operator's request metrics must show that 500."""
    client, container, _headers, campaign_id = studio
    async with container.db.write() as conn:
        await conn.execute(text("DROP TABLE inbound_events"))
    event = mailgun_event("failed", reader(1), campaign_id, severity="permanent")
    with pytest.raises(DBAPIError):  # the in-process transport re-raises what the app did not
        await post_event(client, event)
    metrics = container.metrics.render().decode().splitlines()
    counted = [
        line
        for line in metrics
        if line.startswith("tidings_http_requests_total{")
        and 'route="/api/events/mailgun"' in line
        and 'status="500"' in line
    ]
    assert len(counted) == 1, metrics
    assert counted[0].endswith(" 1.0"), counted


async def test_the_generic_form_reports_events_from_any_provider(studio: Studio) -> None:
    """Providers without a webhook of their own reach the same policy through a bridge that
    posts the documented JSON form with an admin key."""
    client, container, headers, campaign_id = studio
    body = {
        "events": [
            {
                "id": "bridge-1",
                "type": "hard_bounce",
                "email": reader(1),
                "occurred_at": datetime.now(UTC).isoformat(),
                "message_id": message_id(str(campaign_id), reader(1), DOMAIN),
                "code": "5.1.1",
            },
            {
                "id": "bridge-2",
                "type": "delivered",
                "email": reader(2),
                "occurred_at": datetime.now(UTC).isoformat(),
            },
        ]
    }
    response = await client.post("/api/admin/events", json=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json() == {"outcomes": ["applied", "applied"]}
    assert await suppression_of(container, reader(1)) == "hard_bounce"
    assert (await recipient_row(container, campaign_id, reader(1))).bounce_code == "5.1.1"
    bad = {"events": [{**body["events"][0], "id": "bridge-3", "type": "exploded"}]}
    refused = await client.post("/api/admin/events", json=bad, headers=headers)
    assert refused.status_code == 422
    assert "type" in refused.json()["detail"]
    unauthenticated = await client.post("/api/admin/events", json=body)
    assert unauthenticated.status_code == 401
    async with container.db.read() as conn:
        stored = list((await conn.execute(select(inbound_events.c.event_key))).scalars())
    assert sorted(stored) == ["bridge-1", "bridge-2"]


async def test_the_mailgun_route_is_closed_until_a_signing_key_is_set(database_url: str) -> None:
    """Without the key nothing could be verified: the route must not accept anything."""
    async with api_client(make_settings(database_url)) as (client, _container):
        response = await post_event(client, mailgun_event("delivered", reader(1), None))
    assert response.status_code == 404


async def test_campaign_statistics_count_what_came_back_per_segment(studio: Studio) -> None:
    """The publisher sees how the campaign landed (SND-27): deliveries, bounces, complaints
    and unsubscribes through its link, per segment, in the API and on the command line."""
    client, container, headers, campaign_id = studio
    for number in (1, 2, 3):
        await post_event(client, mailgun_event("delivered", reader(number), campaign_id))
    await post_event(client, mailgun_event("failed", reader(4), campaign_id, severity="permanent"))
    await post_event(client, mailgun_event("complained", reader(2), campaign_id))
    subscriber_id = (await recipient_row(container, campaign_id, reader(3))).subscriber_id
    async with container.db.read() as conn:
        [(subscription_id, created_at)] = (
            await conn.execute(
                select(subscriptions.c.id, subscriptions.c.created_at).where(
                    subscriptions.c.subscriber_id == subscriber_id
                )
            )
        ).all()
    token = container.audience.unsubscribe_token(subscription_id, created_at)
    assert (await client.post(f"/unsubscribe/{token}")).status_code < 400
    response = await client.get(f"/api/admin/campaigns/{campaign_id}/stats", headers=headers)
    assert response.status_code == 200, response.text
    stats = response.json()
    assert stats["total"] | {"rates": None} == {
        "sent": 4,
        "delivered": 3,
        "hard_bounced": 1,
        "soft_bounced": 0,
        "complained": 1,
        "unsubscribed": 1,
        "rates": None,
    }
    assert stats["total"]["rates"]["delivered"] == 0.75
    assert set(stats["segments"]) == {"free", "paid"}  # readers 1, 3 free; 2, 4 paid
    assert stats["segments"]["paid"]["hard_bounced"] == 1
    assert stats["segments"]["free"]["unsubscribed"] == 1
    missing = await client.get("/api/admin/campaigns/999/stats", headers=headers)
    assert missing.status_code == 404
    result = await invoke_cli(container, "campaign", "stats", str(campaign_id), "--json")
    assert result.returncode == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1]) == stats
    table = await invoke_cli(container, "campaign", "stats", str(campaign_id))
    assert "75.0%" in table.stdout


async def test_an_unsubscribe_counts_for_the_campaign_whose_link_was_used(
    studio: Studio, dev_provider: DevProviderServer
) -> None:
    """A publisher comparing issues must see each issue's own unsubscribes (SND-27): a link
    from an older issue counts for that issue, not for the latest one; a link from mail sent
    before links named their issue still unsubscribes (and counts for the latest)."""
    client, container, headers, first = studio
    second = await create_campaign(client, headers)
    response = await client.post(f"/api/admin/campaigns/{second}/send", headers=headers)
    assert response.status_code == 202, response.text
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, second) == "submitted"
    first_id = message_id(str(first), reader(3), DOMAIN)
    mailed = next(
        r for r in dev_provider.store.recipients
        if r.address == reader(3) and r.message_id == first_id
    )  # fmt: skip
    found = re.search(
        r"<https?://[^/>]+(/unsubscribe/[^>]+)>", mailed.headers()["List-Unsubscribe"]
    )
    assert found is not None
    assert (await client.post(found.group(1))).status_code < 400
    subscriber_id = (await recipient_row(container, first, reader(1))).subscriber_id
    async with container.db.read() as conn:
        [(subscription_id, created_at)] = (
            await conn.execute(
                select(subscriptions.c.id, subscriptions.c.created_at).where(
                    subscriptions.c.subscriber_id == subscriber_id
                )
            )
        ).all()
    old_style = container.audience.unsubscribe_token(subscription_id, created_at)
    assert (await client.post(f"/unsubscribe/{old_style}")).status_code < 400

    async def unsubscribed(campaign_id: int) -> set[str]:
        rows = await client.get(f"/api/admin/campaigns/{campaign_id}/stats", headers=headers)
        assert rows.status_code == 200, rows.text
        assert rows.json()["total"]["unsubscribed"] == 1
        return {
            address
            for address in (reader(1), reader(3))
            if (await recipient_row(container, campaign_id, address)).unsubscribed_at
        }

    assert await unsubscribed(first) == {reader(3)}
    assert await unsubscribed(second) == {reader(1)}


async def test_the_persons_history_shows_what_was_heard_and_a_privacy_delete_erases_it(
    studio: Studio,
) -> None:
    """An operator answering "why did I stop getting your newsletter?" needs the bounce, its
    diagnostic and the decision (AUD-13) on the person's page, in `subscribers show` and the
    privacy export; after a privacy delete only the suppression's keyed hash remains."""
    client, container, headers, campaign_id = studio
    data = mailgun_event(
        "failed", reader(1), campaign_id, severity="permanent", code=550, description="no such user"
    )
    await post_event(client, data)
    subscriber_id = (await recipient_row(container, campaign_id, reader(1))).subscriber_id
    export = await client.get(f"/api/admin/subscribers/{subscriber_id}/export", headers=headers)
    history = export.json()["history"]
    assert [(h["kind"], h.get("event"), h.get("decision") or h.get("reason")) for h in history] == [
        ("suppression", None, "hard_bounce"),
        ("event", "hard_bounce", "suppressed:hard_bounce"),
    ]
    assert history[1]["diagnostic"] == "no such user"
    assert history[1]["campaign_id"] == campaign_id
    result = await invoke_cli(container, "subscribers", "show", reader(1).upper(), "--json")
    assert result.returncode == 0, result.output
    shown = json.loads(result.stdout.strip().splitlines()[-1])
    assert shown["suppressed"] is True
    assert shown["history"] == history
    unknown = await invoke_cli(container, "subscribers", "show", "nobody@example.test")
    assert unknown.returncode != 0
    assert "no subscriber" in unknown.output
    # The admin UI's session cookie is Secure (public_url is https): browse over https.
    async with httpx.AsyncClient(
        transport=client._transport, base_url="https://tidings.test"
    ) as browser:
        await signed_in(browser, container)
        page = await browser.get(f"/admin/subscribers/{subscriber_id}")
    assert page.status_code == 200
    assert "no such user" in page.text
    assert "hard bounce (550)" in page.text
    deleted = await client.delete(f"/api/admin/subscribers/{subscriber_id}", headers=headers)
    assert deleted.status_code == 204
    async with container.db.read() as conn:
        left = {
            table.name: (await conn.execute(select(table))).all()
            for table in (address_history, inbound_events)
        }
        still_suppressed = (await conn.execute(select(suppressions))).all()
    assert left == {"address_history": [], "inbound_events": []}
    assert len(still_suppressed) == 1


async def test_deliveries_arriving_together_are_each_answered_as_if_alone(studio: Studio) -> None:
    """Deliveries are written together (group commit): a repeat inside one batch must still
    be a duplicate, a reused token still a replay, and every request answered for itself."""
    client, container, _headers, campaign_id = studio
    events = [mailgun_event("delivered", reader(n), campaign_id) for n in (1, 2, 3, 4)]
    bodies = [signed_body(KEY, data, now=datetime.now(UTC)) for data in events]
    bodies.append(bodies[0])  # Mailgun retrying while the first is in flight
    replay = mailgun_event("delivered", reader(2), campaign_id)
    bodies.append(signed_body(KEY, replay, now=datetime.now(UTC), token="z" * 50))
    another = mailgun_event("delivered", reader(3), campaign_id)
    bodies.append(signed_body(KEY, another, now=datetime.now(UTC), token="z" * 50))
    answers = await asyncio.gather(
        *(
            client.post(
                "/api/events/mailgun", content=body, headers={"content-type": "application/json"}
            )
            for body in bodies
        )
    )
    outcomes = [a.json().get("outcome", a.json().get("code")) for a in answers]
    assert sorted(outcomes[:5]) == ["applied", "applied", "applied", "applied", "duplicate"]
    assert sorted(outcomes[5:]) == ["applied", "event_replayed"]  # one token, two events
    async with container.db.read() as conn:
        delivered = (
            await conn.execute(
                select(campaign_recipients.c.delivered_at).where(
                    campaign_recipients.c.campaign_id == campaign_id
                )
            )
        ).scalars()
        assert all(at is not None for at in delivered)


async def test_a_delivery_lands_on_its_row_however_the_provider_spells_the_address(
    studio: Studio,
) -> None:
    """Providers may report the address in other capitals than it was sent to: the delivery
    still lands on the reader's recipient row. A Message-ID made for another reader's address
    ties the event to no row."""
    client, container, _headers, campaign_id = studio
    shouted = reader(1).upper()
    sent_to_1 = message_id(str(campaign_id), reader(1), DOMAIN)
    data = reported("delivered", shouted, message=sent_to_1)
    answer = await post_event(client, data)
    assert answer.json()["outcome"] == "applied", answer.text
    assert (await recipient_row(container, campaign_id, reader(1))).delivered_at is not None
    forged = reported("delivered", reader(2), message=sent_to_1)
    answer = await post_event(client, forged)
    assert answer.json()["outcome"] == "applied", answer.text
    assert (await recipient_row(container, campaign_id, reader(2))).delivered_at is None
    async with container.db.read() as conn:
        linked = (
            await conn.execute(
                select(inbound_events.c.recipient_id).where(
                    inbound_events.c.event_key == forged["id"]
                )
            )
        ).scalar_one()
    assert linked is None


async def test_the_campaign_page_and_list_show_the_results(studio: Studio) -> None:
    """An editor sees how a campaign landed where they look for it: its page (with a chart of
    events over time) and the campaigns list (SND-27)."""
    client, container, _headers, campaign_id = studio
    await post_event(client, mailgun_event("delivered", reader(1), campaign_id))
    await post_event(client, mailgun_event("complained", reader(2), campaign_id))
    async with httpx.AsyncClient(
        transport=client._transport, base_url="https://tidings.test"
    ) as browser:
        await signed_in(browser, container)
        campaign_page = await browser.get(f"/admin/campaigns/{campaign_id}")
        listing = await browser.get("/admin/campaigns")
    assert campaign_page.status_code == 200, campaign_page.text
    assert "Results" in campaign_page.text
    assert "1 (25.0%)" in campaign_page.text  # one delivered of four sent
    assert "Deliveries per hour: 1 deliveries over 1 hours" in campaign_page.text
    assert "Bounces and complaints per hour: 1 bounces and complaints" in campaign_page.text
    assert listing.status_code == 200
    cells = listing.text.split(f'href="/admin/campaigns/{campaign_id}"', 1)[1].split("</tr>", 1)[0]
    assert '<td class="num">4</td>' in cells  # the audience it went to
    rates = re.findall(r'<td class="num" data-count="(\d+)">([\d.]+)%</td>', cells)
    assert rates == [("1", "25.0"), ("0", "0.0"), ("1", "25.0")]  # delivered, bounced, complaints
