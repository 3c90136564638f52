"""Named queries for send again (ENG-7): what an origin's send says about each recipient,
the audience frozen from it in one INSERT ... SELECT, the link between the two campaigns, and
the restriction preparation and the audience count apply to a campaign with a frozen list."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    case,
    exists,
    false,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.send_again import LeftOut, ResendAudience, ResendLink
from tidings.domain.tracking import PIXEL_NUMBER
from tidings.storage.consent import mailable
from tidings.storage.tables import (
    campaign_frozen_audience,
    campaign_links,
    campaign_recipients,
    campaign_resends,
    campaign_sends,
    engagement_person_hits,
    subscribers,
    subscriptions,
)

CHOSEN = "chosen"
SKIPPED = "skipped"  # not what the rule asks for (opened, delivered, ...): neither in nor left out
SENT_STATUSES = ("submitted", "cancelled", "failed")


@dataclass(frozen=True, slots=True)
class OriginSend:
    """What freezing an audience needs to know about the origin's send."""

    sent: bool  # prepared and finished: its recipient rows say what happened
    started_at: datetime | None  # when the send began: tokens made before any later consent
    delivery_reported: bool  # the provider reported at least one delivery for it
    tracked: bool  # its open pixel was stored: its messages were rendered with tracking
    tracking: str | None = None  # the mode frozen at preparation; None before it was recorded


async def origin_send(conn: AsyncConnection, campaign_id: int, status: str) -> OriginSend:
    row = (
        await conn.execute(
            select(
                campaign_sends.c.created_at, campaign_sends.c.prepared_at, campaign_sends.c.tracking
            ).where(campaign_sends.c.campaign_id == campaign_id)
        )
    ).first()
    reported = exists().where(
        campaign_recipients.c.campaign_id == campaign_id,
        campaign_recipients.c.delivered_at.is_not(None),
    )
    pixel = exists().where(
        campaign_links.c.campaign_id == campaign_id, campaign_links.c.number == PIXEL_NUMBER
    )
    delivered, tracked = (await conn.execute(select(reported, pixel))).one()
    sent = row is not None and row.prepared_at is not None and status in SENT_STATUSES
    started = None if row is None else row.created_at
    frozen = None if row is None else row.tracking
    return OriginSend(sent, started, bool(delivered), bool(tracked), frozen)


def _human_hit(origin_id: int, kinds: tuple[str, ...]) -> ColumnElement[bool]:
    """A person's (human, never a machine's) open or click of the origin is recorded."""
    hits = engagement_person_hits
    return exists().where(
        hits.c.campaign_id == origin_id,
        hits.c.subscriber_id == campaign_recipients.c.subscriber_id,
        hits.c.verdict == "human",
        hits.c.kind.in_(kinds),
    )


def _verdicts(
    origin_id: int,
    newsletter_id: int,
    audience: ResendAudience,
    send: OriginSend,
    *,
    hits_may_be_purged: bool,
) -> Select[Any]:
    """(subscriber id, verdict) of each of the origin's recipient rows: `chosen`, `skipped`,
    or the LeftOut reason. One pass over the origin's rows, with AUD-4 judged now."""
    recipient = campaign_recipients.c
    got_it = and_(recipient.state == "sent", recipient.bounced_at.is_(None))
    gone = or_(subscribers.c.id.is_(None), ~mailable())
    whens: list[tuple[ColumnElement[bool], str]]
    if audience is ResendAudience.NOT_DELIVERED:
        unreported = (
            and_(
                recipient.delivered_at.is_(None),
                recipient.complained_at.is_(None),
                recipient.unsubscribed_at.is_(None),
            )
            if send.delivery_reported
            else false()
        )
        missed = or_(
            recipient.state.in_(("failed", "cancelled")),
            and_(recipient.state == "sent", or_(recipient.bounced_at.is_not(None), unreported)),
        )
        whens = [
            (recipient.state == "uncertain", LeftOut.OUTCOME_UNKNOWN.value),
            (~missed, SKIPPED),
            (gone, LeftOut.NOT_MAILABLE.value),
        ]
    elif audience is ResendAudience.ALL:
        whens = [(~got_it, SKIPPED), (gone, LeftOut.NOT_MAILABLE.value)]
    else:
        kinds = ("open", "click") if audience is ResendAudience.NOT_OPENED else ("click",)
        consent = subscribers.c.tracking_consent_at
        # Tracked per person only if their consent was on record when the send began; for
        # everyone else the token was aggregate and whether they opened is unknown.
        assert send.started_at is not None  # a sent origin has a send
        tracked = and_(consent.is_not(None), consent <= send.started_at)
        whens = [
            (~got_it, SKIPPED),
            (_human_hit(origin_id, kinds), SKIPPED),
            (gone, LeftOut.NOT_MAILABLE.value),
            (~tracked, LeftOut.NOT_TRACKED.value),
        ]
        if hits_may_be_purged:
            whens.append((literal(True), LeftOut.HITS_PURGED.value))
    verdict = case(*whens, else_=literal(CHOSEN)).label("verdict")
    joined = campaign_recipients.outerjoin(
        subscribers, subscribers.c.id == recipient.subscriber_id
    ).outerjoin(
        subscriptions,
        and_(
            subscriptions.c.subscriber_id == recipient.subscriber_id,
            subscriptions.c.newsletter_id == newsletter_id,
        ),
    )
    return (
        select(recipient.subscriber_id, verdict)
        .select_from(joined)
        .where(recipient.campaign_id == origin_id)
    )


async def freeze(
    conn: AsyncConnection,
    *,
    campaign_id: int,
    origin_id: int,
    newsletter_id: int,
    audience: ResendAudience,
    send: OriginSend,
    hits_may_be_purged: bool,
    now: datetime,
) -> ResendLink:
    """Link the new campaign to its origin and store its audience: the recipients the rule
    chooses, minus the no-longer-mailable; the rest counted by reason. Returns the link."""
    await conn.execute(
        insert(campaign_resends).values(
            campaign_id=campaign_id,
            origin_id=origin_id,
            audience=audience.value,
            chosen_count=0,
            left_out={},
            created_at=now,
        )
    )
    verdicts = _verdicts(
        origin_id, newsletter_id, audience, send, hits_may_be_purged=hits_may_be_purged
    ).subquery()
    await conn.execute(
        insert(campaign_frozen_audience).from_select(
            ["campaign_id", "subscriber_id"],
            select(literal(campaign_id), verdicts.c.subscriber_id).where(
                verdicts.c.verdict == CHOSEN
            ),
        )
    )
    chosen = int(
        (
            await conn.execute(
                select(func.count()).where(campaign_frozen_audience.c.campaign_id == campaign_id)
            )
        ).scalar_one()
    )
    # Counted apart from the insert: anyone already frozen is never counted as left out too.
    frozen = select(campaign_frozen_audience.c.subscriber_id).where(
        campaign_frozen_audience.c.campaign_id == campaign_id
    )
    counted = (
        select(verdicts.c.verdict, func.count())
        .where(
            verdicts.c.verdict.not_in((CHOSEN, SKIPPED)),
            or_(verdicts.c.subscriber_id.is_(None), verdicts.c.subscriber_id.not_in(frozen)),
        )
        .group_by(verdicts.c.verdict)
    )
    left_out = {str(reason): int(count) for reason, count in await conn.execute(counted)}
    await conn.execute(
        update(campaign_resends)
        .where(campaign_resends.c.campaign_id == campaign_id)
        .values(chosen_count=chosen, left_out=left_out)
    )
    return ResendLink(campaign_id, origin_id, audience, chosen, left_out, now)


def _link(row: Any) -> ResendLink:
    return ResendLink(
        campaign_id=row.campaign_id,
        origin_id=row.origin_id,
        audience=ResendAudience(row.audience),
        chosen_count=row.chosen_count,
        left_out=dict(row.left_out),
        created_at=row.created_at,
    )


async def link_of(conn: AsyncConnection, campaign_id: int) -> ResendLink | None:
    """The campaign's link to its origin, None for a campaign not made by send again."""
    found = (
        await conn.execute(
            select(campaign_resends).where(campaign_resends.c.campaign_id == campaign_id)
        )
    ).first()
    return None if found is None else _link(found)


async def resends_of(conn: AsyncConnection, origin_id: int) -> list[ResendLink]:
    """The campaigns sent again from `origin_id`, oldest first."""
    query = (
        select(campaign_resends)
        .where(campaign_resends.c.origin_id == origin_id)
        .order_by(campaign_resends.c.campaign_id)
    )
    return [_link(row) for row in await conn.execute(query)]


def frozen_restriction(campaign_id: Any) -> ColumnElement[bool]:
    """Over `subscribers`: everyone, for a campaign with no frozen audience; for one made by
    send again, only the people frozen into it (the consent rule is applied beside this)."""
    frozen = campaign_frozen_audience.c
    return or_(
        ~exists().where(campaign_resends.c.campaign_id == campaign_id),
        subscribers.c.id.in_(select(frozen.subscriber_id).where(frozen.campaign_id == campaign_id)),
    )
