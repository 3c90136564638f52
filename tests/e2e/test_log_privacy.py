"""No personal data in logs (PRI-5): every path that handles an address, a name or a link token
logs ids only, checked on every structured event the product emits while the paths run."""

from __future__ import annotations

import json
from typing import Any

import structlog
from structlog.typing import EventDict

from tests.e2e.audience_helpers import create_newsletter, sent_confirmation_token, settled
from tests.factories import admin_headers, api_client, make_settings
from tests.support.sending import FAST_QUEUE, create_campaign, workers
from tests.support.webhook_receiver import loopback_webhook_client, receiver
from tidings.domain import tokens
from tidings.storage import subscribers as subscriber_queries
from tidings.storage import subscriptions as subscription_queries

READER = ("Ottilie.Reader@example.org", "Ottilie Vandersloot")
IMPORTED = ("Imogen.Imported@example.org", "Imogen Quillfeather")
TESTER = "tess.tester@example.org"
BAD_ROW = "not-an-address-but-personal"


def _holding(events: list[EventDict], needles: list[str]) -> list[tuple[str, str]]:
    """(event, needle) for every captured event that holds a needle, in any case."""
    found = []
    for event in events:
        text = json.dumps(event, default=repr, ensure_ascii=False).lower()
        found += [(str(event.get("event")), n) for n in needles if n.lower() in text]
    return found


async def test_no_log_event_holds_an_address_a_name_or_a_token(database_url: str) -> None:
    """PRI-5: logs are shipped to third parties and kept for long; an address, a name or a
    bearer token in them is a leak no privacy delete can reach. Subscribe, confirm,
    preferences, unsubscribe, import, test-send and webhook delivery (including a receiver
    that fails and echoes the payload back) must log ids and codes only."""
    settings = make_settings(database_url, queue=FAST_QUEUE)
    secrets: list[str] = []
    with structlog.testing.capture_logs() as events:
        async with (
            receiver() as port,
            api_client(settings, webhook_client=loopback_webhook_client()) as (client, container),
        ):
            headers = await admin_headers(container)
            await create_newsletter(client, headers)
            for path in ("in", "fail"):
                hook = await client.post(
                    "/api/admin/webhooks",
                    headers=headers,
                    json={"url": f"http://hooks.example.org:{port}/{path}", "event_types": ["*"]},
                )
                assert hook.status_code == 201, hook.text
            async with workers(container):
                await client.post(
                    "/api/subscribe",
                    json={"email": READER[0], "name": READER[1], "newsletter": "weekly"},
                )
                token = await sent_confirmation_token(container)
                secrets += [token, tokens.hash_token(token)]
                assert (await client.get(f"/confirm/{token}")).status_code == 200
                assert (await client.post(f"/confirm/{token}")).status_code == 200
                imported = await client.post(
                    "/api/admin/subscribers/import",
                    params={"newsletter": "weekly"},
                    headers={**headers, "content-type": "text/csv"},
                    content=(
                        "email,name,status\n"
                        f"{IMPORTED[0]},{IMPORTED[1]},confirmed\n"
                        f"{BAD_ROW},Nobody,confirmed\n"
                    ).encode(),
                )
                assert imported.json()["created"] == 1
                assert imported.json()["failed_rows"] == 1
                campaign_id = await create_campaign(client, headers)
                tested = await client.post(
                    f"/api/admin/campaigns/{campaign_id}/test-send",
                    headers=headers,
                    json={"to": [TESTER, READER[0]]},
                )
                assert tested.status_code == 202
                unsubscribe, preferences = await _link_tokens(container, READER[0])
                secrets += [unsubscribe, preferences]
                assert (await client.get(f"/preferences/{preferences}")).status_code == 200
                saved = await client.post(f"/preferences/{preferences}", data={"newsletter": []})
                assert saved.status_code == 200
                await client.get(f"/unsubscribe/{unsubscribe}")
                one_click = await client.post(
                    f"/unsubscribe/{unsubscribe}", data={"List-Unsubscribe": "One-Click"}
                )
                assert one_click.status_code == 200
                await settled(container)
    names = {str(event.get("event")) for event in events}
    assert {
        "subscription.confirmed",
        "subscription.unsubscribed",
        "subscriber_mail.sent",
        "campaign.test_sent",
        "job.done",
        "job.dead",  # the failing receiver's deliveries, after their attempts
    } <= names, names
    needles = [*READER, *IMPORTED, TESTER, BAD_ROW, *secrets]
    assert _holding(events, needles) == []


async def _link_tokens(container: Any, email: str) -> tuple[str, str]:
    """The unsubscribe and preferences tokens the person's campaign mail would carry."""
    async with container.db.read() as conn:
        subscriber = await subscriber_queries.get_by_key(conn, email.lower())
        assert subscriber is not None
        ((subscription, _, _),) = await subscription_queries.of_subscriber(conn, subscriber.id)
    secret = container.site_secret()
    return (
        tokens.sign(secret, "unsubscribe", subscription.id, subscription.created_at),
        tokens.sign(secret, "preferences", subscriber.id, subscriber.created_at),
    )
