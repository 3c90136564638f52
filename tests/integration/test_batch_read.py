"""A batch's recipients as a worker reads them to send (SND-10): custom fields (AUD-12) are
read only when the segment shows one, and the rest of each row is the same either way."""

from __future__ import annotations

import pytest
from sqlalchemy import select, update

from tests.factories import make_settings
from tests.support.sending import (
    FAST_QUEUE,
    prepared_send,
    studio_with,
)
from tidings.storage.sending import batch_recipients
from tidings.storage.tables import campaign_batches, subscribers

CITY = {"city": "Lisbon"}


@pytest.mark.parametrize("attributes", [True, False], ids=["slot-shows-one", "no-slot"])
async def test_custom_fields_are_read_only_when_a_slot_shows_one(
    database_url: str, attributes: bool
) -> None:
    """A segment without an `{{ attribs.… }}` slot sends without its readers' custom fields
    (no column read, no dict built per reader); one with a slot gets every reader's fields.
    Everything else about each row, the consent verdict included, is the same either way."""
    settings = make_settings(database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 20})
    async with studio_with(settings, 20) as (client, container, headers):
        campaign_id = await prepared_send(client, container, headers)
        async with container.db.write() as conn:
            await conn.execute(update(subscribers).values(attributes=CITY))
            batch_id, count = (
                await conn.execute(
                    select(campaign_batches.c.id, campaign_batches.c.recipient_count)
                    .where(campaign_batches.c.campaign_id == campaign_id)
                    .order_by(campaign_batches.c.page)
                    .limit(1)
                )
            ).one()
        async with container.db.read() as conn:
            both = await batch_recipients.load(conn, batch_id, 1)
            rows = await batch_recipients.load(conn, batch_id, 1, attributes=attributes)
    assert len(rows) == count > 1
    assert [row.attributes for row in rows] == [CITY if attributes else None] * count
    assert [row[:-1] for row in rows] == [row[:-1] for row in both]
