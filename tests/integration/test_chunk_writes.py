"""The write between two chunks of a batch (SND-10, SND-12, SND-14, SND-23): the previous
chunk's outcomes settled and counted, the next chunk marked in flight with consent re-checked,
only under the batch's claim, and nothing marked once the send is paused. PostgreSQL does it in
one statement, SQLite step by step: the same calls must leave the same rows on both."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import delete, select, text, update

from tests.factories import make_settings
from tests.support.sending import (
    FAST_QUEUE,
    first_batch,
    prepared_send,
    studio_with,
)
from tidings.bootstrap import Container
from tidings.domain.sending import Exclusion, RecipientState
from tidings.storage.sending.chunk_writes import settle_and_mark
from tidings.storage.tables import (
    campaign_batches,
    campaign_recipients,
    campaigns,
    subscribers,
    subscriptions,
)

SENT, FAILED, UNCERTAIN, PENDING = (
    RecipientState.SENT,
    RecipientState.FAILED,
    RecipientState.UNCERTAIN,
    RecipientState.PENDING,
)


class Batch:
    """A prepared campaign's first batch, claimed with the token `ours`."""

    def __init__(self, container: Container, campaign_id: int, batch_id: int, rows: list[Any]):
        self.container = container
        self.campaign_id = campaign_id
        self.id = batch_id
        self.rows = rows  # (id, subscriber_id) by position
        self.newsletter_id = 1  # the studio's one newsletter

    def ids(self, *positions: int) -> list[int]:
        return [self.rows[p - 1].id for p in positions]

    async def write(
        self,
        settled: list[tuple[int, RecipientState, str | None]],
        marked: list[int],
        *,
        holder: str = "ours",
        in_flight: RecipientState = RecipientState.SENDING,
    ) -> Any:
        async with self.container.db.write() as conn:
            return await settle_and_mark(
                conn,
                self.id,
                campaign_id=self.campaign_id,
                newsletter_id=self.newsletter_id,
                settled=settled,
                ids=marked,
                in_flight=in_flight,
                token=holder,
                now=self.container.sending.now(),
            )

    async def states(self) -> list[tuple[str, str | None]]:
        query = (
            select(campaign_recipients.c.state, campaign_recipients.c.reason)
            .where(campaign_recipients.c.batch_id == self.id)
            .order_by(campaign_recipients.c.position)
        )
        async with self.container.db.read() as conn:
            return [(row.state, row.reason) for row in await conn.execute(query)]

    async def counts(self) -> tuple[Any, ...]:
        query = select(
            campaign_batches.c.submitted_count,
            campaign_batches.c.failed_count,
            campaign_batches.c.uncertain_count,
            campaign_batches.c.submission_excluded_count,
        ).where(campaign_batches.c.id == self.id)
        async with self.container.db.read() as conn:
            return tuple((await conn.execute(query)).one())


@pytest.fixture
async def batch(database_url: str) -> AsyncIterator[Batch]:
    settings = make_settings(database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 20})
    async with studio_with(settings, 40) as (client, container, headers):
        campaign_id = await prepared_send(client, container, headers)
        async with container.db.write() as conn:
            batch_id = await first_batch(conn, campaign_id)
            await conn.execute(
                update(campaign_batches)
                .where(campaign_batches.c.id == batch_id)
                .values(status="submitting", claim_token="ours")
            )
            rows = list(
                await conn.execute(
                    select(campaign_recipients.c.id, campaign_recipients.c.subscriber_id)
                    .where(campaign_recipients.c.batch_id == batch_id)
                    .order_by(campaign_recipients.c.position)
                )
            )
        yield Batch(container, campaign_id, batch_id, rows)


async def test_outcomes_settle_and_the_next_chunk_goes_in_flight_without_who_left(
    batch: Batch,
) -> None:
    """Chunk 1 (positions 1-5) in flight; readers 7 and 8 leave (one unsubscribes, one is
    deleted); then chunk 1's outcomes with chunk 2 (6-10): 7 and 8 are excluded with their
    reasons and returned, the rest of chunk 2 is in flight, each outcome is on its row (a
    deferral back to `pending`), and the batch counts what settled."""
    assert await batch.write([], batch.ids(1, 2, 3, 4, 5)) == []
    leaving, gone = batch.rows[6].subscriber_id, batch.rows[7].subscriber_id
    async with batch.container.db.write() as conn:
        now = batch.container.sending.now()
        await conn.execute(
            update(subscriptions)
            .where(subscriptions.c.subscriber_id == leaving)
            .values(unsubscribed_at=now, unsubscribe_count=1, last_unsubscribed_at=now)
        )
        await conn.execute(delete(subscribers).where(subscribers.c.id == gone))
    first = batch.ids(1, 2, 3, 4, 5)
    outcomes = [
        (first[0], SENT, None),
        (first[1], FAILED, "smtp_rejected_550"),
        (first[2], UNCERTAIN, "smtp_answer_lost"),
        (first[3], PENDING, "smtp_deferred_451"),
        (first[4], SENT, None),
    ]
    withdrawn = await batch.write(outcomes, batch.ids(6, 7, 8, 9, 10))
    assert sorted((row.id, row.subscriber_id, row.reason) for row in withdrawn) == [
        (batch.rows[6].id, leaving, Exclusion.CONSENT_WITHDRAWN.value),
        (batch.rows[7].id, None, Exclusion.MEMBER_NOT_FOUND.value),
    ]
    states = await batch.states()
    assert states[:10] == [
        ("sent", None),
        ("failed", "smtp_rejected_550"),
        ("uncertain", "smtp_answer_lost"),
        ("pending", "smtp_deferred_451"),
        ("sent", None),
        ("sending", None),
        ("excluded", "consent_withdrawn"),
        ("excluded", "member_not_found"),
        ("sending", None),
        ("sending", None),
    ]
    assert all(state == ("pending", None) for state in states[10:])
    assert await batch.counts() == (2, 1, 1, 2)


async def test_a_writer_without_the_batch_claim_changes_nothing(batch: Batch) -> None:
    """Another worker took the batch over: the late one's outcomes and marks are not made."""
    await batch.write([], batch.ids(1, 2))
    before = (await batch.states(), await batch.counts())
    await batch.write([(batch.ids(1)[0], SENT, None)], batch.ids(3, 4), holder="theirs")
    assert (await batch.states(), await batch.counts()) == before


async def test_a_paused_send_has_its_outcomes_settled_and_nothing_marked(batch: Batch) -> None:
    """SND-23: the outcomes in hand are recorded; the next chunk stays `pending`; None says
    the send is off."""
    await batch.write([], batch.ids(1, 2))
    async with batch.container.db.write() as conn:
        await conn.execute(
            update(campaigns).where(campaigns.c.id == batch.campaign_id).values(status="paused")
        )
    first = batch.ids(1, 2)
    assert await batch.write([(first[0], SENT, None), (first[1], SENT, None)], batch.ids(3)) is None
    assert (await batch.states())[:3] == [("sent", None), ("sent", None), ("pending", None)]
    assert (await batch.counts())[0] == 2


async def test_a_batch_call_excludes_who_left_and_leaves_the_rest_pending(batch: Batch) -> None:
    """A batch call keeps its rows `pending` while it is out (the batch row is marked handed
    over instead): the re-check still excludes a reader who left, and touches no other row."""
    gone = batch.rows[2].subscriber_id
    async with batch.container.db.write() as conn:
        await conn.execute(delete(subscribers).where(subscribers.c.id == gone))
    everyone = [row.id for row in batch.rows]
    withdrawn = await batch.write([], everyone, in_flight=PENDING)
    assert [(row.id, row.reason) for row in withdrawn] == [
        (batch.rows[2].id, Exclusion.MEMBER_NOT_FOUND.value)
    ]
    states = await batch.states()
    assert states[2] == ("excluded", "member_not_found")
    assert states[:2] + states[3:] == [("pending", None)] * (len(everyone) - 1)
    assert await batch.counts() == (None, None, None, 1)


async def test_outcomes_change_recipient_rows_in_place_on_postgresql(batch: Batch) -> None:
    """No index covers a column an outcome changes, and prepared pages keep room: each state
    change is a heap-only update on PostgreSQL (a row version and no index entries; before,
    one entry in each of five indexes). Counted by the server for this transaction."""
    if batch.container.db.dialect != "postgresql":
        pytest.skip("heap-only tuples are PostgreSQL's")
    first, second = batch.ids(*range(1, 11)), batch.ids(*range(11, 21))
    async with batch.container.db.write() as conn:
        now = batch.container.sending.now()
        common = {
            "campaign_id": batch.campaign_id,
            "newsletter_id": batch.newsletter_id,
            "in_flight": RecipientState.SENDING,
            "token": "ours",
            "now": now,
        }
        await settle_and_mark(conn, batch.id, settled=[], ids=first, **common)
        outcomes = [(recipient, SENT, None) for recipient in first]
        await settle_and_mark(conn, batch.id, settled=outcomes, ids=second, **common)
        updated, heap_only = (
            await conn.execute(
                text(
                    "SELECT pg_stat_get_xact_tuples_updated(c.oid),"
                    " pg_stat_get_xact_tuples_hot_updated(c.oid)"
                    " FROM pg_class c WHERE c.relname = 'campaign_recipients'"
                )
            )
        ).one()
    assert (updated, heap_only) == (30, 30)
    assert await batch.states() == [("sent", None)] * 10 + [("sending", None)] * 10
