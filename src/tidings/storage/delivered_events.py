"""A batch of `delivered` events recorded at once (PRV-6: a million-recipient campaign brings
a million of them within the hour; `audience/hearing/group_commit.py` gathers them).

For each event: the subscriber with the reported address, the campaign recipient its
Message-ID names, the received-event row (the dedupe and replay guard), the recipient's
`delivered_at`, and two facts the caller acts on one by one (rare): whether the Message-ID is
a transactional message's, and whether the address has a bounce record.

On PostgreSQL all of it is one statement, built once: the events as arrays unnested WITH
ORDINALITY, the look-ups as joins, the INSERT ... ON CONFLICT DO NOTHING and the UPDATE of
the recipients as data-modifying CTEs over what the INSERT returned. One round trip for a
batch, where separate statements cost a round trip each and most of a batch's CPU (measured,
issue 22). SQLite takes the same steps as a handful of statements.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Select,
    String,
    Text,
    and_,
    bindparam,
    case,
    exists,
    func,
    literal,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage import feedback, subscribers, transactional_outcomes
from tidings.storage.bulk import insert_rows, pairs_among, unnested
from tidings.storage.dialect import UTCDateTime, is_postgresql
from tidings.storage.sending import recipient_outcomes
from tidings.storage.tables import (
    address_feedback,
    campaign_recipients,
    inbound_events,
    transactional_messages,
)
from tidings.storage.tables import subscribers as subscriber_table


@dataclass(frozen=True, slots=True)
class DeliveredEvent:
    """One `delivered` event to record; events of a batch have distinct (source, event_key)."""

    source: str
    event_key: str
    token: str | None
    email_key: str | None  # the reported address's key; None when it is no address
    email: str | None  # the reported address, normalised
    email_hash: str | None  # the keyed hash of `email_key`
    campaign_id: int | None  # the campaign its Message-ID names, checked against `email`
    message_key: str | None  # the Message-ID's local part
    occurred_at: datetime
    code: str | None
    diagnostic: str | None


@dataclass(frozen=True, slots=True)
class DeliveredRecord:
    """What recording one event found and did."""

    recorded: feedback.Recorded
    subscriber_id: int | None
    email_hash: str | None  # the subscriber's, else the reported address's
    campaign_id: int | None  # only if the subscriber's address is the one the ID was made for
    recipient_id: int | None
    transactional: bool  # its Message-ID is a transactional message's (meaningful when new)
    has_record: bool  # the address has a bounce record (meaningful when new and matched)

    @property
    def new(self) -> bool:
        return self.recorded == "new"


async def record_delivered(
    conn: AsyncConnection, events: Sequence[DeliveredEvent], *, received_at: datetime
) -> list[DeliveredRecord]:
    """Record `events` and mark their recipients delivered (the earliest time wins), in one
    statement on PostgreSQL; a record for each event, in order."""
    if not events:
        return []
    if is_postgresql(conn):
        found = await _record_delivered_postgresql(conn, events, received_at)
    else:
        found = await _record_delivered_sqlite(conn, events, received_at)
    # Not inserted: inserted before (a retry), or another event's signature token (a replay).
    not_new = [(e.source, e.event_key) for e, r in zip(events, found, strict=True) if not r.new]
    if not not_new:
        return found
    columns = inbound_events.c.source, inbound_events.c.event_key
    rows = await conn.execute(select(*columns).where(pairs_among(conn, *columns, not_new)))
    seen = {(row.source, row.event_key) for row in rows}
    return [
        record
        if record.new
        else replace(
            record, recorded="duplicate" if (e.source, e.event_key) in seen else "replayed"
        )
        for e, record in zip(events, found, strict=True)
    ]


# The columns of the unnested events: name, type.
_GIVEN: dict[str, Any] = {
    "source": String(),
    "event_key": String(),
    "token": String(),
    "email_key": String(),
    "email": String(),
    "email_hash": String(),
    "campaign_id": BigInteger(),
    "message_key": String(),
    "occurred_at": UTCDateTime(),
    "code": String(),
    "diagnostic": Text(),
}


async def _record_delivered_postgresql(
    conn: AsyncConnection, events: Sequence[DeliveredEvent], received_at: datetime
) -> list[DeliveredRecord]:
    """PostgreSQL: every event in one statement (`_statement`)."""
    values: dict[str, Any] = {
        f"given_{name}": [getattr(event, name) for event in events] for name in _GIVEN
    }
    rows = await conn.execute(_statement(), {**values, "received_at": received_at})
    return [
        DeliveredRecord(
            "new" if row.new else "duplicate",
            row.subscriber_id,
            row.email_hash,
            row.campaign_id,
            row.recipient_id,
            row.transactional,
            row.has_record,
        )
        for row in rows
    ]


@functools.cache
def _statement() -> Select[Any]:
    """The PostgreSQL statement (built once; its compiled form is cached by SQLAlchemy)."""
    given = unnested(_GIVEN, None, prefix="given", ordinality="n")
    person = subscriber_table.c
    matched = (
        select(
            given,
            person.id.label("subscriber_id"),
            func.coalesce(person.email_hash, given.c.email_hash).label("target_hash"),
            # The Message-ID was checked against the reported address: it names this
            # subscriber's campaign only if that is the address they have.
            case((person.email == given.c.email, given.c.campaign_id)).label("target_campaign"),
        )
        .select_from(given.outerjoin(subscriber_table, person.email_key == given.c.email_key))
        .cte("matched")
    )
    recipient = campaign_recipients.c
    targeted = (
        select(matched, recipient.id.label("recipient_id"))
        .select_from(
            matched.outerjoin(
                campaign_recipients,
                and_(
                    recipient.campaign_id == matched.c.target_campaign,
                    recipient.subscriber_id == matched.c.subscriber_id,
                ),
            )
        )
        .cte("targeted")
    )
    t = targeted.c
    status = case((t.subscriber_id.is_(None), "unmatched"), else_="applied")
    rows = select(
        t.source,
        t.event_key,
        t.token,
        literal("delivered"),
        status,
        t.target_hash,
        t.target_campaign,
        t.recipient_id,
        t.occurred_at,
        t.code,
        t.diagnostic,
        bindparam("received_at", type_=UTCDateTime()),
    )
    names = [
        "source", "event_key", "token", "kind", "status", "email_hash", "campaign_id",
        "recipient_id", "occurred_at", "code", "diagnostic", "received_at",
    ]  # fmt: skip
    inserted = (
        pg_insert(inbound_events)
        .from_select(names, rows)
        .on_conflict_do_nothing()
        .returning(inbound_events.c.source, inbound_events.c.event_key)
        .cte("inserted")
    )
    is_new = and_(inserted.c.source == t.source, inserted.c.event_key == t.event_key)
    earliest = (
        select(t.recipient_id, func.min(t.occurred_at).label("at"))
        .select_from(targeted.join(inserted, is_new))
        .where(t.recipient_id.is_not(None))
        .group_by(t.recipient_id)
        .subquery("earliest")
    )
    delivered = (
        update(campaign_recipients)
        .where(recipient.id == earliest.c.recipient_id)
        .values(**recipient_outcomes.outcome_values(recipient, kind="delivered", at=earliest.c.at))
        .cte("delivered")
    )
    transactional = exists().where(transactional_messages.c.message_key == t.message_key)
    has_record = exists().where(address_feedback.c.email_hash == t.target_hash)
    return (
        select(
            inserted.c.source.is_not(None).label("new"),
            t.subscriber_id,
            t.target_hash.label("email_hash"),
            t.target_campaign.label("campaign_id"),
            t.recipient_id,
            and_(t.target_campaign.is_(None), transactional).label("transactional"),
            and_(t.subscriber_id.is_not(None), has_record).label("has_record"),
        )
        .select_from(targeted.outerjoin(inserted, is_new))
        .add_cte(delivered)
        .order_by(t.n)
    )


async def _record_delivered_sqlite(
    conn: AsyncConnection, events: Sequence[DeliveredEvent], received_at: datetime
) -> list[DeliveredRecord]:
    """The same as `_statement`, as separate statements (SQLite)."""
    found = await subscribers.by_keys(conn, [e.email_key for e in events if e.email_key])
    people = [found.get(e.email_key) if e.email_key else None for e in events]
    campaigns = [
        e.campaign_id if person is not None and person.email == e.email else None
        for e, person in zip(events, people, strict=True)
    ]
    pairs = [
        (campaign, person.id)
        for person, campaign in zip(people, campaigns, strict=True)
        if person is not None and campaign is not None
    ]
    recipients = await recipient_outcomes.recipients_of(conn, pairs)
    targets = [
        (
            person,
            person.email_hash if person is not None else e.email_hash,
            campaign,
            recipients.get((campaign, person.id))
            if person is not None and campaign is not None
            else None,
        )
        for e, person, campaign in zip(events, people, campaigns, strict=True)
    ]
    inserted = await insert_rows(
        conn,
        inbound_events,
        [
            {
                "source": e.source,
                "event_key": e.event_key,
                "token": e.token,
                "kind": "delivered",
                "status": "unmatched" if person is None else "applied",
                "email_hash": email_hash,
                "campaign_id": campaign,
                "recipient_id": recipient,
                "occurred_at": e.occurred_at,
                "code": e.code,
                "diagnostic": e.diagnostic,
                "received_at": received_at,
            }
            for e, (person, email_hash, campaign, recipient) in zip(events, targets, strict=True)
        ],
        finish=lambda statement: statement.on_conflict_do_nothing().returning(
            inbound_events.c.source, inbound_events.c.event_key
        ),
    )
    new = {(row.source, row.event_key) for row in inserted}
    is_new = [(e.source, e.event_key) in new for e in events]
    await recipient_outcomes.record_deliveries(
        conn,
        [
            (recipient, e.occurred_at)
            for e, fresh, (_, _, _, recipient) in zip(events, is_new, targets, strict=True)
            if fresh and recipient is not None
        ],
    )
    ours = await transactional_outcomes.known(
        conn,
        [
            e.message_key
            for e, (_, _, campaign, _) in zip(events, targets, strict=True)
            if e.message_key and campaign is None
        ],
    )
    with_records = await feedback.hashes_with_records(
        conn, [email_hash for person, email_hash, _, _ in targets if person and email_hash]
    )
    return [
        DeliveredRecord(
            "new" if fresh else "duplicate",
            person.id if person is not None else None,
            email_hash,
            campaign,
            recipient,
            campaign is None and e.message_key in ours,
            person is not None and email_hash in with_records,
        )
        for e, fresh, (person, email_hash, campaign, recipient) in zip(
            events, is_new, targets, strict=True
        )
    ]
