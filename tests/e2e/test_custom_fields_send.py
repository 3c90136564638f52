"""Custom fields end to end (AUD-12): imported from a CSV, a campaign filtered by
`attr:city=Paris` goes to exactly those people, each message carrying their own field."""

from __future__ import annotations

from email import message_from_bytes
from email.message import Message

from sqlalchemy import select

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    wait_for_campaign_status,
    workers,
)
from tidings.storage.tables import captured_messages

CSV = (
    "email,name,status,City,Plan\n"
    "ann@example.org,Ann,confirmed,Paris,gold\n"
    "bob@example.org,Bob,confirmed,Lyon,\n"
    "cy@example.org,Cy,confirmed,Paris,\n"
    "dee@example.org,Dee,confirmed,,\n"
)


def _text(message: Message) -> str:
    for part in message.walk():
        if part.get_content_type() == "text/plain":
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)
            return payload.decode()
    raise AssertionError("no text part")


async def test_a_campaign_to_attr_city_paris_reaches_them_with_their_own_fields(
    database_url: str,
) -> None:
    """A publisher segments by what they imported and greets people with it; the wrong
    person, or someone else's data in a message, would be a breach of trust."""
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        imported = await client.post(
            "/api/admin/subscribers/import",
            params={"newsletter": "weekly"},
            content=CSV.encode(),
            headers={**headers, "content-type": "text/csv"},
        )
        assert imported.status_code == 200, imported.text
        assert imported.json()["attribute_columns"] == ["City", "Plan"]
        preview = await client.post(
            "/api/admin/campaigns",
            headers=headers,
            json={"newsletter": "weekly", "subject": "x", "body": "{{ attribs }}"},
        )
        assert preview.status_code == 422
        campaign_id = await create_campaign(
            client,
            headers,
            body=(
                "Bonjour {{ name }} of {{ attribs.city }}, "
                'plan {{ attribs.plan | fallback: "basic" }}.'
            ),
            audience_filter="attr:city=Paris",
        )
        sent = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        assert sent.status_code == 202, sent.text
        assert sent.json()["preflight_email_count"] == 2
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        async with container.db.read() as conn:
            raw = [row.raw for row in await conn.execute(select(captured_messages.c.raw))]
        texts = {
            str(message_from_bytes(data)["To"]): _text(message_from_bytes(data)) for data in raw
        }
        assert set(texts) == {"Ann <ann@example.org>", "Cy <cy@example.org>"}
        assert "Bonjour Ann of Paris, plan gold." in texts["Ann <ann@example.org>"]
        assert "Bonjour Cy of Paris, plan basic." in texts["Cy <cy@example.org>"]
