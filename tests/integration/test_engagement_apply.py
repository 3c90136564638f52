"""The applier folds the intake into counters, firsts, consented people's hits and the
`subscriber.engaged` webhook (ENG-3, ENG-5, ENG-6; issue 36 items 3, 4 and 7)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import delete, func, select

from tests.factories import make_settings
from tests.support.tracking import (
    add_intake,
    counters,
    give_consent,
    intake_row,
    intake_rows,
    sent_campaign,
)
from tests.support.waiting import wait_for
from tidings.bootstrap import Container, build, start
from tidings.config.tracking import TrackingSettings
from tidings.engagement.apply import EngagementApplier, apply_all
from tidings.storage.tables import (
    campaigns,
    engagement_notices,
    engagement_person_hits,
    webhook_deliveries,
)

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
async def container(database_url: str) -> AsyncIterator[Container]:
    built = build(make_settings(database_url))
    try:
        await start(built, apply_migrations=False)
        yield built
    finally:
        await built.close()


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def test_replayed_hits_never_move_unique_counts(container: Container) -> None:
    """Hits are recorded at least once, so the same hit may arrive twice: totals count what
    arrived, but a message counts once per link and kind in the unique figures."""
    db = container.db
    sent = await sent_campaign(db, readers=1, mode="aggregate", now=T0)
    hits = [
        intake_row(sent.campaign_id, 0, "message-a", _at(60)),
        intake_row(sent.campaign_id, 1, "message-a", _at(70)),
        intake_row(sent.campaign_id, 3, "message-a", _at(90)),
        intake_row(sent.campaign_id, 1, "message-b", _at(80)),
        intake_row(sent.campaign_id, 1, "message-c", _at(85), verdict="machine"),
    ]
    await add_intake(db, hits)
    assert await apply_all(db) == 5
    first = await counters(db, sent.campaign_id)
    assert first == {
        (0, "open"): (1, 1, 0),
        (1, "click"): (2, 2, 1),
        (3, "click"): (1, 1, 0),
        (0, "click"): (2, 3, 1),  # message a clicked two links: one unique, two clicks
    }
    await add_intake(db, hits)  # the same hits again
    assert await apply_all(db) == 5
    again = await counters(db, sent.campaign_id)
    assert {key: value[0] for key, value in again.items()} == {
        key: value[0] for key, value in first.items()
    }
    assert again[(0, "click")] == (2, 6, 2)
    assert await intake_rows(db) == []


async def test_hits_of_a_deleted_campaign_are_dropped(container: Container) -> None:
    """A campaign deleted between a hit and its applying leaves no counter behind, and its
    hits do not wait in the intake forever."""
    db = container.db
    sent = await sent_campaign(db, readers=1, mode="aggregate", now=T0)
    await add_intake(db, [intake_row(sent.campaign_id, 1, "message-a", _at(60))])
    async with db.write() as conn:
        await conn.execute(delete(campaigns).where(campaigns.c.id == sent.campaign_id))
    assert await apply_all(db) == 1
    assert await counters(db, sent.campaign_id) == {}
    assert await intake_rows(db) == []


def _burst_hits(campaign_id: int) -> list[dict[str, object]]:
    """Message a: a scanner clicking links 1, 2, 3 within half a second (a burst), then a
    person's click a minute later; message b: a person clicking two links seconds apart."""
    return [
        intake_row(campaign_id, 1, "message-a", _at(100.0)),
        intake_row(campaign_id, 2, "message-a", _at(100.2)),
        intake_row(campaign_id, 3, "message-a", _at(100.5)),
        intake_row(campaign_id, 1, "message-a", _at(160.0)),
        intake_row(campaign_id, 1, "message-b", _at(100.0)),
        intake_row(campaign_id, 3, "message-b", _at(104.0)),
        intake_row(campaign_id, 0, "message-b", _at(99.0)),
    ]


async def test_a_burst_counts_the_same_whatever_order_and_batches_it_came_in(
    container: Container,
) -> None:
    """Link checkers click every link of a message within a second. Whether those clicks
    arrive in order, shuffled, or split across applier batches, the same clicks are the
    machine's and the counters end the same."""
    db = container.db
    ordered = await sent_campaign(db, readers=1, mode="aggregate", now=T0, slug="ordered")
    await add_intake(db, _burst_hits(ordered.campaign_id))
    await apply_all(db)
    shuffled = await sent_campaign(db, readers=1, mode="aggregate", now=T0, slug="shuffled")
    hits = _burst_hits(shuffled.campaign_id) * 3  # replayed too
    random.Random(36).shuffle(hits)
    await add_intake(db, hits)
    small = EngagementApplier(db, TrackingSettings(apply_batch=10), container.clock)
    while await small.apply_once(settled=False):
        pass
    expected = {
        (0, "open"): (1, 1, 0),
        (1, "click"): (2, 2, 1),  # a's later click is a person's; b's too
        (2, "click"): (0, 0, 1),
        (3, "click"): (1, 1, 1),
        (0, "click"): (2, 3, 3),
    }
    assert await counters(db, ordered.campaign_id) == expected
    tripled = {key: (value[0], value[1] * 3, value[2] * 3) for key, value in expected.items()}
    assert await counters(db, shuffled.campaign_id) == tripled


async def _count(container: Container, query: object) -> int:
    async with container.db.read() as conn:
        return int((await conn.execute(query)).scalar_one())  # type: ignore[call-overload]


async def test_only_consented_subscribers_hits_are_kept_per_person(container: Container) -> None:
    """Per-person tracking is for people who said yes: a consented subscriber's hits join
    their activity; another's (consent withdrawn since the send, say), a privacy-deleted
    person's old link and every hit of an aggregate newsletter are counted in the campaign
    only, naming nobody."""
    db = container.db
    per_person = await sent_campaign(db, readers=3, mode="per_person", now=T0)
    aggregate = await sent_campaign(db, readers=1, mode="aggregate", now=T0, slug="plain")
    consenting = per_person.subscribers[0]
    await give_consent(db, consenting, T0)
    await give_consent(db, aggregate.subscribers[0], T0)
    await give_consent(db, per_person.subscribers[2], T0)
    await container.subscribers.delete(per_person.subscribers[2])
    await add_intake(
        db,
        [
            intake_row(per_person.campaign_id, 1, "k1", _at(60), recipient_id=r)
            for r in per_person.recipients
        ]
        + [
            intake_row(aggregate.campaign_id, 1, "k2", _at(60), recipient_id=r)
            for r in aggregate.recipients
        ],
    )
    await apply_all(db)
    async with db.read() as conn:
        people = await conn.execute(
            select(engagement_person_hits.c.subscriber_id, engagement_person_hits.c.campaign_id)
        )
        assert list(people) == [(consenting, per_person.campaign_id)]
    assert (await counters(db, per_person.campaign_id))[(1, "click")] == (1, 3, 0)


async def test_subscriber_engaged_goes_out_once_per_person_and_campaign(
    container: Container,
) -> None:
    """A CRM listening for engagement wants to hear a person engaged, not every click: one
    event per person and campaign, none for a machine's hit alone."""
    db = container.db
    await container.webhooks.create_endpoint(
        "https://hooks.example.org/tidings", ["subscriber.engaged"]
    )
    sent = await sent_campaign(db, readers=2, mode="per_person", now=T0)
    for subscriber_id in sent.subscribers:
        await give_consent(db, subscriber_id, T0)
    reader, scanned = sent.recipients
    await add_intake(
        db,
        [
            intake_row(sent.campaign_id, 0, "k1", _at(60), recipient_id=reader),
            intake_row(sent.campaign_id, 1, "k1", _at(70), recipient_id=reader),
            intake_row(sent.campaign_id, 1, "k2", _at(5), recipient_id=scanned, verdict="machine"),
        ],
    )
    await container.engagement_applier.apply_once(settled=False)
    await add_intake(db, [intake_row(sent.campaign_id, 3, "k1", _at(90), recipient_id=reader)])
    await container.engagement_applier.apply_once(settled=False)
    engaged = select(func.count()).where(webhook_deliveries.c.event_type == "subscriber.engaged")
    assert await _count(container, engaged) == 1
    async with db.read() as conn:
        payload = (await conn.execute(select(webhook_deliveries.c.payload))).scalar_one()
        notices = list(await conn.execute(select(engagement_notices.c.subscriber_id)))
    assert payload["data"]["subscriber_id"] == sent.subscribers[0]
    assert payload["data"]["campaign_id"] == sent.campaign_id
    assert notices == [(sent.subscribers[0],)]


async def test_the_workers_apply_hits_on_their_own(container: Container) -> None:
    """Nobody runs the applier by hand in production: the workers' `apply_engagement` task
    folds settled hits into the counters about once a second."""
    db = container.db
    sent = await sent_campaign(db, readers=1, mode="aggregate", now=T0)
    await add_intake(db, [intake_row(sent.campaign_id, 1, "message-a", _at(60))])
    stop = asyncio.Event()
    workers = asyncio.create_task(container.run_workers(stop))
    try:

        async def applied() -> dict[tuple[int, str], tuple[int, int, int]]:
            return await counters(db, sent.campaign_id)

        assert await wait_for(applied) == {(1, "click"): (1, 1, 0), (0, "click"): (1, 1, 0)}
    finally:
        stop.set()
        await workers
    assert await intake_rows(db) == []
