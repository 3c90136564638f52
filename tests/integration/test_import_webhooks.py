"""Webhook events of a CSV import (issue 12, item 10): one event per change, set-based
publication (deliveries and their jobs together), and endpoints that opt out of imports."""

import io
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from tests.support import rows
from tests.support.audience import audience_context
from tests.support.clock import Clock
from tidings.audience.context import AudienceContext
from tidings.audience.importer import Importer
from tidings.outbound.webhooks import DELIVER_WEBHOOK, DeliverWebhook
from tidings.queue import store as job_store
from tidings.queue.job import Job
from tidings.storage import importing
from tidings.storage.database import Database
from tidings.storage.tables import jobs, webhook_deliveries

HEADER = "email,name,tier,labels,newsletter,status,created_at,attributes"


@pytest.fixture
async def context(db: Database) -> AudienceContext:
    async with db.write() as conn:
        for slug in ("weekly", "offers"):
            await rows.newsletter(
                conn, slug=slug, name=slug.title(), sender_address="news@example.org"
            )
    return audience_context(db, Clock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC)))


async def _import(context: AudienceContext, *lines: str) -> None:
    text = io.StringIO("\n".join([HEADER, *lines]) + "\n", newline="")
    await Importer(context).import_csv(text, newsletter_slug="weekly", actor="ops")


async def _published(db: Database) -> list[dict[str, Any]]:
    """Every delivery with its job, oldest first."""
    async with db.read() as conn:
        deliveries = [
            dict(row._mapping)
            for row in await conn.execute(select(webhook_deliveries).order_by("id"))
        ]
        queued = [
            await job_store.get(conn, job_id)
            for job_id in (await conn.execute(select(jobs.c.id).order_by("id"))).scalars()
        ]
    by_delivery = {
        DeliverWebhook.from_job(job).delivery_id: job
        for job in queued
        if isinstance(job, Job) and job.kind == DELIVER_WEBHOOK
    }
    for delivery in deliveries:
        delivery["job"] = by_delivery.get(delivery["id"])
    return deliveries


async def test_a_new_confirmed_import_is_one_created_event_carrying_its_state(
    context: AudienceContext, db: Database
) -> None:
    """A receiver syncing a CRM must get one fact per person, with their consent state in it,
    not a `created` followed by a `confirmed` for the same import row."""
    await context.webhooks.create_endpoint("https://hooks.example.org/in", ["*"])
    await _import(
        context,
        "ada@example.org,Ada,,,,confirmed,",
        "bob@example.org,,,,,pending,",
        "cy@example.org,,,,,unsubscribed,",
    )
    published = await _published(db)
    assert [d["event_type"] for d in published] == ["subscriber.created"] * 3
    states = {d["payload"]["data"]["email"]: d["payload"]["data"]["state"] for d in published}
    assert states == {
        "ada@example.org": "confirmed",
        "bob@example.org": "pending",
        "cy@example.org": "unsubscribed",
    }
    assert {d["payload"]["data"]["newsletter"] for d in published} == {"weekly"}
    assert {d["payload"]["data"]["source"] for d in published} == {"import"}


async def test_every_imported_delivery_is_queued_with_its_own_job(
    context: AudienceContext, db: Database
) -> None:
    """Deliveries written in bulk must each be attempted: a delivery without its job would
    stay `pending` forever, and two deliveries sharing one job would lose one."""
    for number in range(3):
        await context.webhooks.create_endpoint(f"https://hooks{number}.example.org/in", ["*"])
    await _import(context, *(f"reader{n}@example.org,,,,,confirmed," for n in range(25)))
    published = await _published(db)
    assert len(published) == 25 * 3
    assert all(d["job"] is not None and d["status"] == "pending" for d in published)
    assert len({d["job"].idempotency_key for d in published}) == len(published)
    assert len({(d["event_id"], d["endpoint_id"]) for d in published}) == len(published)
    assert len({d["event_id"] for d in published}) == 25  # one event, three endpoints


async def test_later_changes_to_existing_people_publish_confirmed_and_unsubscribed(
    context: AudienceContext, db: Database
) -> None:
    """Consent an import changes on people already stored is still reported, once per change;
    a re-import that changes nothing reports nothing."""
    await context.webhooks.create_endpoint("https://hooks.example.org/in", ["*"])
    await _import(context, "ada@example.org,,,,,pending,", "bob@example.org,,,,,confirmed,")
    await _import(context, "ada@example.org,,,,,confirmed,", "bob@example.org,,,,,unsubscribed,")
    await _import(context, "ada@example.org,,,,,confirmed,", "bob@example.org,,,,,unsubscribed,")
    later = [(d["event_type"], d["payload"]["data"]["email"]) for d in (await _published(db))[2:]]
    assert sorted(later) == [
        ("subscriber.confirmed", "ada@example.org"),
        ("subscriber.unsubscribed", "bob@example.org"),
    ]


async def test_an_endpoint_can_opt_out_of_import_events_but_not_of_live_ones(
    context: AudienceContext, db: Database
) -> None:
    """An endpoint that wants only live sign-ups must not be flooded by a 100,000-row import,
    and must still hear about the next person who signs up."""
    quiet = await context.webhooks.create_endpoint(
        "https://quiet.example.org/in", ["*"], include_imports=False
    )
    loud = await context.webhooks.create_endpoint("https://loud.example.org/in", ["*"])
    await _import(context, "ada@example.org,,,,,confirmed,", "bob@example.org,,,,,pending,")
    assert {d["endpoint_id"] for d in await _published(db)} == {loud.id}
    async with db.write() as conn:
        await context.webhooks.publish(conn, "subscriber.created", {"subscriber_id": 9})
    live = [d for d in await _published(db) if d["endpoint_id"] == quiet.id]
    assert [d["event_type"] for d in live] == ["subscriber.created"]
    assert live[0]["job"] is not None
    changed = await context.webhooks.update_endpoint(quiet.id, include_imports=True)
    assert changed.include_imports


async def test_rows_the_database_skipped_are_not_reported_as_written(
    context: AudienceContext, db: Database
) -> None:
    """What an import publishes comes from what its statements wrote: a subscription that
    appeared meanwhile (ON CONFLICT DO NOTHING) or a subscriber that already existed must not
    be announced as new."""
    now = datetime(2026, 3, 2, tzinfo=UTC)
    person = {"email": "ada@example.org", "email_key": "ada@example.org", "email_hash": "h1"}
    async with db.write() as conn:
        ids, created = await importing.upsert_subscribers(
            conn,
            [{**person, "name": None, "tier": "free", "attributes": {}}],
            update_tier=False,
            now=now,
        )
        assert created == {"ada@example.org"}
        again, created_again = await importing.upsert_subscribers(
            conn,
            [{**person, "name": "Ada", "tier": "free", "attributes": {}}],
            update_tier=False,
            now=now.replace(day=3),
        )
        assert again == ids
        assert created_again == set()
        newsletter_id = await rows.newsletter(conn, slug="daily", name="Daily")
        pair = {"subscriber_id": ids["ada@example.org"], "newsletter_id": newsletter_id}
        first = await importing.insert_subscriptions(
            conn,
            [{**pair, "created_at": now}],
            state="pending",
            source="import",
            evidence="x",
            now=now,
        )
        second = await importing.insert_subscriptions(
            conn,
            [{**pair, "created_at": now}],
            state="confirmed",
            source="import",
            evidence="x",
            now=now,
        )
    assert first == [(ids["ada@example.org"], newsletter_id)]
    assert second == []
