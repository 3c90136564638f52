"""Set-based writes done one way on PostgreSQL and another on SQLite (storage/bulk.py's
`insert_rows`, storage/delivered_events.py's `record_delivered`): the same rows on both
dialects (each test runs on both)."""

from datetime import timedelta
from typing import Any

from sqlalchemy import insert, select

from tidings.bootstrap import utcnow
from tidings.storage.bulk import insert_rows
from tidings.storage.database import Database
from tidings.storage.delivered_events import DeliveredEvent, record_delivered
from tidings.storage.tables import address_feedback, inbound_events, labels, subscribers


async def test_insert_rows_writes_the_same_rows_on_both_dialects(db: Database) -> None:
    """Imports add labels and memberships through `insert_rows`: unnested arrays on
    PostgreSQL, executemany on SQLite. Both must add each row once with its constants, skip
    the ones already there and return exactly the rows they added."""
    now = utcnow()
    async with db.write() as conn:
        await conn.execute(insert(labels).values(name="old", created_at=now))
        added = await insert_rows(
            conn,
            labels,
            [{"name": name} for name in ("alpha", "old", "beta")],
            constants={"created_at": now},
            finish=lambda statement: statement.on_conflict_do_nothing(
                index_elements=["name"]
            ).returning(labels.c.name),
        )
        returned = sorted(row.name for row in added)
    async with db.read() as conn:
        rows = [
            (row.name, row.created_at == now)
            for row in await conn.execute(select(labels).order_by(labels.c.name))
        ]
    assert returned == ["alpha", "beta"]
    assert rows == [("alpha", True), ("beta", True), ("old", True)]


def _event(key: str, email: str, *, token: str | None = None, **given: Any) -> DeliveredEvent:
    """A delivered event for `email`; `hash-of-ADDRESS` is its hash when no one has it."""
    address = email.lower()
    return DeliveredEvent(
        source="mailgun",
        event_key=key,
        token=token or f"token-{key}",
        email_key=address,
        email=email,
        email_hash=f"hash-of-{address}",
        campaign_id=given.get("campaign_id"),
        message_key=given.get("message_key"),
        occurred_at=utcnow() - timedelta(minutes=5),
        code="250",
        diagnostic="OK",
    )


async def test_record_delivered_writes_the_same_rows_on_both_dialects(db: Database) -> None:
    """Delivered events are one hand-written statement on PostgreSQL and a handful of
    queries on SQLite: a known address, an unknown one, a campaign kept only for the address
    spelled as it was sent to, an address with a bounce record, a retry and a replayed token
    must be recorded and answered alike on both, or hearing back would depend on the
    database."""
    now = utcnow()
    async with db.write() as conn:
        ids = {}
        for email in ("ann@example.org", "bob@example.org"):
            row = await conn.execute(
                insert(subscribers)
                .values(
                    email=email,
                    email_key=email,
                    email_hash=f"hash-{email}",
                    attributes={},
                    created_at=now,
                    updated_at=now,
                )
                .returning(subscribers.c.id)
            )
            ids[email] = row.scalar_one()
        await conn.execute(
            insert(address_feedback).values(
                email_hash="hash-bob@example.org", soft_bounces=[], updated_at=now
            )
        )
    first = [
        _event("e1", "ann@example.org"),
        _event("e2", "nobody@example.org"),
        _event("e3", "bob@example.org", campaign_id=999),
        _event("e5", "BOB@example.org", campaign_id=999),
    ]
    async with db.write() as conn:
        recorded = await record_delivered(conn, first, received_at=now)
    again = [_event("e1", "ann@example.org"), _event("e4", "ann@example.org", token="token-e2")]
    async with db.write() as conn:
        recorded += await record_delivered(conn, again, received_at=now)
    answers = [
        (r.recorded, r.subscriber_id, r.email_hash, r.campaign_id, r.recipient_id, r.has_record)
        for r in recorded
    ]
    ann, bob = ids["ann@example.org"], ids["bob@example.org"]
    assert answers == [
        ("new", ann, "hash-ann@example.org", None, None, False),
        ("new", None, "hash-of-nobody@example.org", None, None, False),
        ("new", bob, "hash-bob@example.org", 999, None, True),
        ("new", bob, "hash-bob@example.org", None, None, True),
        ("duplicate", ann, "hash-ann@example.org", None, None, False),
        ("replayed", ann, "hash-ann@example.org", None, None, False),
    ]
    async with db.read() as conn:
        stored = [
            (row.event_key, row.kind, row.status, row.email_hash, row.campaign_id, row.code)
            for row in await conn.execute(
                select(inbound_events).order_by(inbound_events.c.event_key)
            )
        ]
    assert stored == [
        ("e1", "delivered", "applied", "hash-ann@example.org", None, "250"),
        ("e2", "delivered", "unmatched", "hash-of-nobody@example.org", None, "250"),
        ("e3", "delivered", "applied", "hash-bob@example.org", 999, "250"),
        ("e5", "delivered", "applied", "hash-bob@example.org", None, "250"),
    ]
