"""Named queries for a person's engagement (ENG-6): their own hits (per_person, consented
only), what their campaigns' recipient rows say happened after sending, the retention
purge of old hits, and the engagement questions segments and the sunset policy ask (ENG-7):
"did this person engage (human) since T" and "could we have seen it"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    String,
    and_,
    cast,
    delete,
    exists,
    func,
    literal,
    null,
    select,
    union_all,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.tables import (
    campaign_links,
    campaign_recipients,
    campaign_sends,
    campaigns,
    engagement_person_hits,
    newsletters,
    subscribers,
)


@dataclass(frozen=True, slots=True)
class PersonHit:
    """One open or click of a consented person; `url` is None for the open pixel."""

    at: datetime
    kind: str  # open | click
    campaign_id: int
    subject: str
    url: str | None
    verdict: str  # human | machine
    reason: str
    client_family: str


@dataclass(frozen=True, slots=True)
class RecipientOutcome:
    """A bounce, complaint or unsubscribe recorded on one of the person's recipient rows."""

    at: datetime
    kind: str  # bounce | complaint | unsubscribe
    campaign_id: int
    subject: str
    bounce_kind: str | None = None  # hard | soft, for a bounce
    bounce_code: str | None = None


async def hits_of(
    conn: AsyncConnection, subscriber_id: int, *, limit: int | None = None
) -> list[PersonHit]:
    """The person's hits, newest first, each with its campaign's subject and link URL."""
    hits = engagement_person_hits
    link = and_(
        campaign_links.c.campaign_id == hits.c.campaign_id,
        campaign_links.c.segment == hits.c.segment,
        campaign_links.c.number == hits.c.number,
    )
    query = (
        select(
            hits.c.at,
            hits.c.kind,
            hits.c.campaign_id,
            campaigns.c.subject,
            campaign_links.c.url,
            hits.c.verdict,
            hits.c.reason,
            hits.c.client_family,
        )
        .join(campaigns, campaigns.c.id == hits.c.campaign_id)
        .outerjoin(campaign_links, link)
        .where(hits.c.subscriber_id == subscriber_id)
        .order_by(hits.c.at.desc(), hits.c.id.desc())
        .limit(limit)
    )
    return [
        PersonHit(**{**row._mapping, "url": row.url or None}) for row in await conn.execute(query)
    ]


async def outcomes_of(
    conn: AsyncConnection, subscriber_id: int, *, limit: int | None = None
) -> list[RecipientOutcome]:
    """Bounces, complaints and unsubscribes on the person's recipient rows, newest first."""
    recipients = campaign_recipients
    mine = recipients.c.subscriber_id == subscriber_id
    nothing = cast(null(), String)
    parts = [
        select(
            recipients.c.bounced_at.label("at"),
            literal("bounce", String).label("kind"),
            recipients.c.campaign_id,
            recipients.c.bounce_kind,
            recipients.c.bounce_code,
        ).where(mine, recipients.c.bounced_at.is_not(None)),
        *(
            select(
                column.label("at"),
                literal(kind, String).label("kind"),
                recipients.c.campaign_id,
                nothing.label("bounce_kind"),
                nothing.label("bounce_code"),
            ).where(mine, column.is_not(None))
            for column, kind in (
                (recipients.c.complained_at, "complaint"),
                (recipients.c.unsubscribed_at, "unsubscribe"),
            )
        ),
    ]
    found = union_all(*parts).subquery()
    query = (
        select(
            found.c.at,
            found.c.kind,
            found.c.campaign_id,
            campaigns.c.subject,
            found.c.bounce_kind,
            found.c.bounce_code,
        )
        .join(campaigns, campaigns.c.id == found.c.campaign_id)
        .order_by(found.c.at.desc())
        .limit(limit)
    )
    return [RecipientOutcome(**row._mapping) for row in await conn.execute(query)]


async def purge_before(conn: AsyncConnection, before: datetime, *, batch: int) -> int:
    """Delete up to `batch` hits older than `before` (oldest first); returns how many. The
    campaign counters already hold them: deleting a person's hit changes no figure."""
    hits = engagement_person_hits
    oldest = select(hits.c.id).where(hits.c.at < before).order_by(hits.c.at).limit(batch)
    result = await conn.execute(delete(hits).where(hits.c.id.in_(oldest.scalar_subquery())))
    return int(result.rowcount)


async def forget(conn: AsyncConnection, subscriber_ids: Sequence[int]) -> int:
    """Delete the hits of these people (their consent withdrawn); returns how many."""
    if not subscriber_ids:
        return 0
    hits = engagement_person_hits
    result = await conn.execute(delete(hits).where(hits.c.subscriber_id.in_(subscriber_ids)))
    return int(result.rowcount)


def engaged_since(
    subscriber_id: ColumnElement[Any] | int,
    since: datetime | ColumnElement[Any],
    *,
    newsletter_id: ColumnElement[Any] | int | None = None,
    campaign_id: ColumnElement[Any] | int | None = None,
) -> ColumnElement[bool]:
    """EXISTS a human open or click by the person at or after `since` (machine hits never
    count), of a campaign of `newsletter_id`, or of `campaign_id`, or of any. Only consented
    people of per_person newsletters have hits: false says "no human hit recorded", which
    means "did not engage" only where `tracked_sends_since` says we could have seen one."""
    hits = engagement_person_hits
    conditions = [hits.c.subscriber_id == subscriber_id, hits.c.verdict == "human"]
    conditions.append(hits.c.at >= since)
    if campaign_id is not None:
        conditions.append(hits.c.campaign_id == campaign_id)
    if newsletter_id is not None:
        of_newsletter = select(campaigns.c.id).where(campaigns.c.newsletter_id == newsletter_id)
        conditions.append(hits.c.campaign_id.in_(of_newsletter.scalar_subquery()))
    return exists().where(*conditions)


def tracked_sends_since(
    subscriber_id: ColumnElement[Any] | int,
    newsletter_id: ColumnElement[Any] | int,
    since: datetime,
) -> Select[Any]:
    """The person's recipient rows, sent, of the newsletter's campaigns whose send began at or
    after `since` and after the person's tracking consent, with tracked links, while the
    newsletter tracks per person: the sends that would have recorded their hits. The
    newsletter's mode is read now (hits are recorded per person only while it is per_person)."""
    recipients = campaign_recipients
    person = subscribers.alias("tracked_person")  # not the outer query's `subscribers`
    return (
        select(recipients.c.id)
        .join(campaigns, campaigns.c.id == recipients.c.campaign_id)
        .join(campaign_sends, campaign_sends.c.campaign_id == campaigns.c.id)
        .join(newsletters, newsletters.c.id == campaigns.c.newsletter_id)
        .join(person, person.c.id == recipients.c.subscriber_id)
        .where(
            recipients.c.subscriber_id == subscriber_id,
            recipients.c.state == "sent",
            campaigns.c.newsletter_id == newsletter_id,
            newsletters.c.tracking == "per_person",
            campaign_sends.c.created_at >= since,
            person.c.tracking_consent_at.is_not(None),
            campaign_sends.c.created_at >= person.c.tracking_consent_at,
            exists().where(campaign_links.c.campaign_id == campaigns.c.id),
        )
    )


def unengaged_since(
    subscriber_id: ColumnElement[Any] | int,
    newsletter_id: ColumnElement[Any] | int,
    since: datetime,
) -> ColumnElement[bool]:
    """Known not to have engaged: sent at least one campaign tracked per person since `since`
    (after their consent) and no human hit since then. Unknown people are not matched."""
    return and_(
        exists(tracked_sends_since(subscriber_id, newsletter_id, since)),
        ~engaged_since(subscriber_id, since, newsletter_id=newsletter_id),
    )


def tracked_send_count_since(
    subscriber_id: ColumnElement[Any] | int,
    newsletter_id: ColumnElement[Any] | int,
    since: datetime,
) -> ColumnElement[int]:
    """How many `tracked_sends_since` rows the person has (a correlated count)."""
    sends = tracked_sends_since(subscriber_id, newsletter_id, since)
    return sends.with_only_columns(func.count(campaign_recipients.c.id)).scalar_subquery()
