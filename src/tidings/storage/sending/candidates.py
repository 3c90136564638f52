"""A campaign's audience in SQL: the AUD-11 filter compiled, the preflight count, and the
one-statement selection of candidates into `campaign_candidates` (SND-3)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    case,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    true,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.segments import AudienceFilter, Term
from tidings.domain.sending import SegmentRange
from tidings.storage import engagement_people, resends
from tidings.storage.consent import mailable
from tidings.storage.dialect import attribute_text
from tidings.storage.subscribers import attribute_equals, has_label
from tidings.storage.tables import campaign_candidates, newsletters, subscribers, subscriptions


def _term(term: Term, newsletter_id: Any, now: datetime | None) -> ColumnElement[bool]:
    clause: ColumnElement[bool]
    if term.kind in ("engaged", "unengaged"):
        if newsletter_id is None:
            raise ValueError("an engagement term needs the newsletter")
        since = (now or datetime.now(UTC)) - timedelta(days=term.days)
        if term.kind == "engaged":
            clause = engagement_people.engaged_since(
                subscribers.c.id, since, newsletter_id=newsletter_id
            )
        else:
            clause = engagement_people.unengaged_since(subscribers.c.id, newsletter_id, since)
    elif term.kind == "tier":
        clause = subscribers.c.tier == term.value
    elif term.kind == "attr":
        # NULL (no such attribute) is no match, and its negation must include the person.
        clause = func.coalesce(attribute_equals(term.key, term.value), False)
    else:
        clause = has_label(term.value)
    return ~clause if term.negated else clause


def filter_clause(
    audience: AudienceFilter, *, newsletter_id: Any = None, now: datetime | None = None
) -> ColumnElement[bool]:
    """The filter as SQL over `subscribers`: the same rule `AudienceFilter.matches` applies.
    Engagement terms judge hits of `newsletter_id`'s campaigns within their window before
    `now` (the wall clock when not given)."""
    if not audience.clauses:
        return true()
    return or_(
        *(
            and_(*(_term(term, newsletter_id, now) for term in clause))
            for clause in audience.clauses
        )
    )


def audience(
    newsletter_id: int,
    audience_filter: AudienceFilter,
    *,
    now: datetime | None = None,
    campaign_id: int | None = None,
) -> Select[Any]:
    """(subscriber id, segment) of every mailable subscriber the campaign targets, once each.
    The consent rule is AUD-4's one SQL definition; the segment is the subscriber's tier.
    Given `campaign_id`, a campaign made by send again is held to its frozen audience (ENG-7)."""
    query = (
        select(subscribers.c.id.label("subscriber_id"), subscribers.c.tier.label("segment"))
        .distinct()
        .join(subscriptions, subscriptions.c.subscriber_id == subscribers.c.id)
        .where(
            subscriptions.c.newsletter_id == newsletter_id,
            mailable(),
            filter_clause(audience_filter, newsletter_id=newsletter_id, now=now),
        )
    )
    if campaign_id is not None:
        query = query.where(resends.frozen_restriction(campaign_id))
    return query


async def count_audience(
    conn: AsyncConnection,
    newsletter_id: int,
    audience_filter: AudienceFilter,
    *,
    now: datetime | None = None,
    campaign_id: int | None = None,
) -> int:
    """The preflight estimate (SND-1): the consent-filtered audience size now (of campaign
    `campaign_id`: its frozen audience, if it has one)."""
    chosen = audience(newsletter_id, audience_filter, now=now, campaign_id=campaign_id).subquery()
    return int((await conn.execute(select(func.count()).select_from(chosen))).scalar_one())


async def count_lacking(
    conn: AsyncConnection,
    newsletter_id: int,
    audience_filter: AudienceFilter,
    *,
    segments: tuple[str, ...],
    field: str,
    key: str = "",
    campaign_id: int | None = None,
    now: datetime | None = None,
) -> int:
    """How many of the audience in `segments` (tiers) have no value for a merge tag (CMP-8):
    no name (or only spaces) for `name` and `first_name`, no text or number for the custom
    field `key` of `attribs`, as rendering reads them."""
    chosen = audience(newsletter_id, audience_filter, now=now, campaign_id=campaign_id).subquery()
    value: Any
    if field == "attribs":
        value = attribute_text(subscribers.c.attributes, literal(key), literal(f'$."{key}"'))
    else:
        value = subscribers.c.name
    query = (
        select(func.count())
        .select_from(chosen.join(subscribers, subscribers.c.id == chosen.c.subscriber_id))
        .where(chosen.c.segment.in_(segments), func.coalesce(func.trim(value), "") == "")
    )
    return int((await conn.execute(query)).scalar_one())


async def count_unjudged(conn: AsyncConnection, newsletter_id: int) -> int:
    """Mailable subscribers of the newsletter whose engagement is unknown (ENG-7): no recorded
    tracking consent, or a newsletter that does not track per person. No `engaged:` or
    `unengaged:` term ever matches them."""
    per_person = (
        select(newsletters.c.tracking).where(newsletters.c.id == newsletter_id).scalar_subquery()
        == "per_person"
    )
    query = (
        select(func.count(func.distinct(subscribers.c.id)))
        .join(subscriptions, subscriptions.c.subscriber_id == subscribers.c.id)
        .where(
            subscriptions.c.newsletter_id == newsletter_id,
            mailable(),
            subscribers.c.tracking_consent_at.is_(None) | ~per_person,
        )
    )
    return int((await conn.execute(query)).scalar_one())


async def select_candidates(
    conn: AsyncConnection,
    campaign_id: int,
    newsletter_id: int,
    audience_filter: AudienceFilter,
    segments: tuple[str, ...],
    *,
    split: Callable[[Any, Any], ColumnElement[Any]] | None = None,
) -> int:
    """Select every segment's audience in ONE statement (one snapshot), ordered by segment
    then subscriber id descending, numbered from 1, and store it. Returns the count.
    `split(subscriber_id, tier)` names each candidate's segment when it is not the tier
    (an A/B test's variants, ENG-8)."""
    chosen = audience(newsletter_id, audience_filter, campaign_id=campaign_id).subquery()
    if split is not None:
        chosen = select(
            chosen.c.subscriber_id,
            split(chosen.c.subscriber_id, chosen.c.segment).label("segment"),
        ).subquery()
    order = {segment: index for index, segment in enumerate(segments)}
    segment_rank = case(order, value=chosen.c.segment, else_=len(order))
    position = func.row_number().over(order_by=(segment_rank, chosen.c.subscriber_id.desc()))
    selection = select(
        literal(campaign_id), position, chosen.c.subscriber_id, chosen.c.segment
    ).where(chosen.c.segment.in_(segments))
    await conn.execute(
        insert(campaign_candidates).from_select(
            ["campaign_id", "position", "subscriber_id", "segment"], selection
        )
    )
    counted = select(func.count()).where(campaign_candidates.c.campaign_id == campaign_id)
    return int((await conn.execute(counted)).scalar_one())


async def segment_ranges(conn: AsyncConnection, campaign_id: int) -> list[SegmentRange]:
    """Each segment's run of positions (positions are contiguous within a segment)."""
    query = (
        select(
            campaign_candidates.c.segment,
            func.min(campaign_candidates.c.position),
            func.count(),
        )
        .where(campaign_candidates.c.campaign_id == campaign_id)
        .group_by(campaign_candidates.c.segment)
        .order_by(func.min(campaign_candidates.c.position))
    )
    return [
        SegmentRange(segment, int(first), int(count))
        for segment, first, count in await conn.execute(query)
    ]


async def delete_candidates(conn: AsyncConnection, campaign_id: int, *, limit: int) -> int:
    """Bounded delete: the next `limit` positions (a primary-key range), at most."""
    lowest = (
        await conn.execute(
            select(func.min(campaign_candidates.c.position)).where(
                campaign_candidates.c.campaign_id == campaign_id
            )
        )
    ).scalar_one()
    if lowest is None:
        return 0
    result = await conn.execute(
        delete(campaign_candidates).where(
            campaign_candidates.c.campaign_id == campaign_id,
            campaign_candidates.c.position < lowest + limit,
        )
    )
    return max(int(result.rowcount), 1)
