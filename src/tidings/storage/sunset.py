"""Named queries for the sunset policy (ENG-7): who is due to be asked whether to stay, the
re-permission requests (one per subscription and period, by a unique constraint), and the
requests whose grace period is over or which were answered by a human open or click."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import exists, select, true, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.consent import mailable
from tidings.storage.dialect import insert_for
from tidings.storage.engagement_people import engaged_since, tracked_send_count_since
from tidings.storage.tables import newsletters, subscribers, subscriptions, sunset_requests


@dataclass(frozen=True, slots=True)
class SunsetCandidate:
    """A subscription due to be asked: its person, tracked sends in the period."""

    subscription_id: int
    subscriber_id: int
    email: str
    sends: int


@dataclass(frozen=True, slots=True)
class SunsetRequestRow:
    id: int
    subscription_id: int
    newsletter_id: int
    subscriber_id: int
    period: int
    asked_at: datetime
    outcome: str | None
    resolved_at: datetime | None


def period_of(now: datetime, after_days: int) -> int:
    """The inactivity period `now` falls in: whole `after_days` spans since 1970."""
    return int(now.timestamp() // (after_days * 86400))


async def enabled_newsletters(conn: AsyncConnection) -> list[int]:
    query = select(newsletters.c.id).where(newsletters.c.sunset_enabled.is_(True))
    return [
        int(found) for found in (await conn.execute(query.order_by(newsletters.c.id))).scalars()
    ]


def _due(
    newsletter_id: int,
    now: datetime,
    after_days: int,
    min_sends: int,
    *,
    after: int,
    upto: int | None,
) -> Any:
    """Mailable subscriptions of the newsletter (subscriber ids in (`after`, `upto`]) with
    recorded consent,
    at least `min_sends` tracked sends and no human hit in the last `after_days`, and no
    request asked within that span (answered or not) nor still open."""
    since = now - timedelta(days=after_days)
    sends = tracked_send_count_since(subscribers.c.id, newsletter_id, since)
    recent_request = exists().where(
        sunset_requests.c.subscription_id == subscriptions.c.id,
        (sunset_requests.c.asked_at >= since) | sunset_requests.c.outcome.is_(None),
    )
    return (
        select(
            subscriptions.c.id.label("subscription_id"),
            subscribers.c.id.label("subscriber_id"),
            subscribers.c.email,
            sends.label("sends"),
        )
        .join(subscribers, subscribers.c.id == subscriptions.c.subscriber_id)
        .where(
            subscriptions.c.newsletter_id == newsletter_id,
            subscriptions.c.subscriber_id > after,
            true() if upto is None else subscriptions.c.subscriber_id <= upto,
            mailable(),
            # Confirmed for the whole span: someone who (re)confirmed since has just said yes.
            subscriptions.c.confirmed_at <= since,
            subscribers.c.tracking_consent_at.is_not(None),
            sends >= min_sends,
            ~engaged_since(subscribers.c.id, since, newsletter_id=newsletter_id),
            ~recent_request,
        )
        .order_by(subscriptions.c.subscriber_id)
    )


async def due_to_ask(
    conn: AsyncConnection,
    newsletter_id: int,
    now: datetime,
    *,
    after_days: int,
    min_sends: int,
    after: int = 0,
    upto: int | None = None,
) -> list[SunsetCandidate]:
    """Who the policy would ask now, by subscriber id, among subscriber ids in
    (`after`, `upto`] (everyone by default)."""
    query = _due(newsletter_id, now, after_days, min_sends, after=after, upto=upto)
    return [SunsetCandidate(**row._mapping) for row in await conn.execute(query)]


async def slice_end(conn: AsyncConnection, newsletter_id: int, after: int, size: int) -> int | None:
    """The subscriber id ending the next slice of `size` subscriptions of the newsletter
    after subscriber id `after` (an index range, bounded work); None when fewer are left."""
    query = (
        select(subscriptions.c.subscriber_id)
        .where(
            subscriptions.c.newsletter_id == newsletter_id, subscriptions.c.subscriber_id > after
        )
        .order_by(subscriptions.c.subscriber_id)
        .offset(size - 1)
        .limit(1)
    )
    found = (await conn.execute(query)).scalar()
    return None if found is None else int(found)


async def add_request(
    conn: AsyncConnection,
    *,
    subscription_id: int,
    newsletter_id: int,
    subscriber_id: int,
    period: int,
    now: datetime,
) -> int | None:
    """Record that the person is asked in `period`; None when they already were (the unique
    constraint decides, so two racing runs ask once)."""
    statement = (
        insert_for(conn, sunset_requests)
        .values(
            subscription_id=subscription_id,
            newsletter_id=newsletter_id,
            subscriber_id=subscriber_id,
            period=period,
            asked_at=now,
        )
        .on_conflict_do_nothing(index_elements=["subscription_id", "period"])
        .returning(sunset_requests.c.id)
    )
    found = (await conn.execute(statement)).scalar()
    return None if found is None else int(found)


def _open(newsletter_id: int, now: datetime, grace_days: int) -> Any:
    """Open requests that are over: the grace period ended, or a human hit came since."""
    requests = sunset_requests
    answered = engaged_since(
        requests.c.subscriber_id, requests.c.asked_at, newsletter_id=newsletter_id
    )
    return (
        select(requests, answered.label("engaged"))
        .where(
            requests.c.newsletter_id == newsletter_id,
            requests.c.outcome.is_(None),
            (requests.c.asked_at <= now - timedelta(days=grace_days)) | answered,
        )
        .order_by(requests.c.id)
    )


async def due_to_resolve(
    conn: AsyncConnection, newsletter_id: int, now: datetime, *, grace_days: int, limit: int | None
) -> list[tuple[SunsetRequestRow, bool]]:
    """Open requests to close now, each with whether the person engaged since asked."""
    rows = await conn.execute(_open(newsletter_id, now, grace_days).limit(limit))
    found = []
    for row in rows:
        values = dict(row._mapping)
        engaged = bool(values.pop("engaged"))
        found.append((SunsetRequestRow(**values), engaged))
    return found


async def get_request(conn: AsyncConnection, request_id: int) -> SunsetRequestRow | None:
    row = (
        await conn.execute(select(sunset_requests).where(sunset_requests.c.id == request_id))
    ).first()
    return None if row is None else SunsetRequestRow(**row._mapping)


async def open_request(
    conn: AsyncConnection, subscriber_id: int, newsletter_id: int
) -> SunsetRequestRow | None:
    """The person's unanswered request in this newsletter, if any (the newest)."""
    query = (
        select(sunset_requests)
        .where(
            sunset_requests.c.subscriber_id == subscriber_id,
            sunset_requests.c.newsletter_id == newsletter_id,
            sunset_requests.c.outcome.is_(None),
        )
        .order_by(sunset_requests.c.id.desc())
        .limit(1)
    )
    row = (await conn.execute(query)).first()
    return None if row is None else SunsetRequestRow(**row._mapping)


async def resolve(conn: AsyncConnection, request_id: int, outcome: str, now: datetime) -> bool:
    """Close an open request; False when it was closed already (idempotent)."""
    result = await conn.execute(
        update(sunset_requests)
        .where(sunset_requests.c.id == request_id, sunset_requests.c.outcome.is_(None))
        .values(outcome=outcome, resolved_at=now)
    )
    return int(result.rowcount) == 1


async def requests_of(conn: AsyncConnection, subscriber_id: int) -> list[SunsetRequestRow]:
    """The person's requests, newest first (their page and history)."""
    query = (
        select(sunset_requests)
        .where(sunset_requests.c.subscriber_id == subscriber_id)
        .order_by(sunset_requests.c.id.desc())
    )
    return [SunsetRequestRow(**row._mapping) for row in await conn.execute(query)]


async def due_to_unsubscribe(
    conn: AsyncConnection, newsletter_id: int, now: datetime, *, grace_days: int
) -> list[str]:
    """The addresses an open request would unsubscribe now (grace over, no human hit since)."""
    over = _open(newsletter_id, now, grace_days).subquery()
    query = (
        select(subscribers.c.email)
        .join(over, over.c.subscriber_id == subscribers.c.id)
        .join(subscriptions, subscriptions.c.id == over.c.subscription_id)
        .where(~over.c.engaged, mailable())
        .order_by(over.c.id)
    )
    return [str(email) for email in (await conn.execute(query)).scalars()]
