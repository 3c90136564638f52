"""The verdict on one subscriber a reported event is about (PRV-6, AUD-13): its outcome on the
campaign recipient, then the bounce policy (`domain/feedback.py`) carried out — suppress, lift
a soft-bounce suppression, unsubscribe everywhere — with the webhooks it owes and every
decision on the person's history. Inside the event's transaction; never the address in a log.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import overload

from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.audience.context import AudienceContext
from tidings.audience.public import PublicFlows
from tidings.audience.subscriber_events import subscriber_event
from tidings.domain.feedback import (
    AddressRecord,
    BouncePolicy,
    EventKind,
    FeedbackEvent,
    ReportedEvent,
    stronger_reason,
    verdict,
)
from tidings.storage import feedback as queries
from tidings.storage import subscriptions as subscription_queries
from tidings.storage import suppressions as suppression_queries
from tidings.storage.sending import feedback_counts, recipient_outcomes
from tidings.storage.subscribers import SubscriberRow

# Called in the event's transaction when a campaign gains a hard bounce or a complaint.
CampaignWatch = Callable[[AsyncConnection, int], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class Target:
    """Whom and what an event is about, as far as known."""

    subscriber: SubscriberRow | None
    email_hash: str | None
    campaign_id: int | None
    recipient_id: int | None


class Verdict:
    """Carries out what an event means for the subscriber it is about."""

    def __init__(
        self,
        context: AudienceContext,
        flows: PublicFlows,
        policy: BouncePolicy,
        watch_campaign: CampaignWatch | None,
    ) -> None:
        self._ctx = context
        self._flows = flows
        self.policy = policy
        self._watch_campaign = watch_campaign  # the auto-pause check (SND-24)

    async def apply(
        self,
        conn: AsyncConnection,
        event: ReportedEvent,
        kind: EventKind,
        target: Target,
        subscriber: SubscriberRow,
    ) -> None:
        now = self._ctx.now()
        email_hash = subscriber.email_hash
        if target.recipient_id is not None:
            await self._on_recipient(conn, event, kind, target.recipient_id, target.campaign_id)
        if kind is EventKind.UNSUBSCRIBE:
            left = await self._unsubscribe(conn, subscriber, target.campaign_id)
            await self._history(conn, event, email_hash, target, f"unsubscribed:{left}")
            return
        if kind is EventKind.DELIVERED and not await queries.touch_delivered(
            conn, email_hash, event.occurred_at
        ):
            return  # nothing was counted against the address: nothing to clear
        record = (await queries.load_record(conn, email_hash)).merged(_domain_event(event, kind))
        await queries.save_record(conn, email_hash, record, now=now)
        decisions = await self._decide(conn, event, subscriber, record, now)
        await self._announce(conn, event, kind, subscriber, target, record)
        if kind is not EventKind.DELIVERED or decisions:
            await self._history(
                conn, event, email_hash, target, ",".join(decisions) or _counted(kind, record)
            )

    async def _on_recipient(
        self,
        conn: AsyncConnection,
        event: ReportedEvent,
        kind: EventKind,
        recipient_id: int,
        campaign_id: int | None,
    ) -> None:
        """The outcome on the campaign recipient; a campaign's first hard bounce or complaint
        from them is counted and watched (SND-24)."""
        first = await recipient_outcomes.record_outcome(
            conn, recipient_id, kind=kind.value, at=event.occurred_at, code=event.code
        )
        if campaign_id is not None and (first.hard_bounced or first.complained):
            await feedback_counts.count(
                conn,
                campaign_id,
                hard_bounced=int(first.hard_bounced),
                complained=int(first.complained),
            )
            if self._watch_campaign is not None:
                await self._watch_campaign(conn, campaign_id)

    async def _decide(
        self,
        conn: AsyncConnection,
        event: ReportedEvent,
        subscriber: SubscriberRow,
        record: AddressRecord,
        now: datetime,
    ) -> list[str]:
        """The policy's verdict on the address's record, carried out; returns the decisions
        made, as the history records them."""
        wanted = verdict(record, self.policy)
        email_hash = subscriber.email_hash
        current = await suppression_queries.reason_of(conn, email_hash)
        actor = f"policy:{event.source}"
        decisions: list[str] = []
        if wanted.suppression is not None and stronger_reason(current, wanted.suppression):
            await self._suppress(conn, subscriber, current, wanted.suppression, actor, now)
            decisions.append(f"suppressed:{wanted.suppression}")
        elif wanted.suppression is None and current == "soft_bounce":
            await self._lift(conn, email_hash, actor, now)
            decisions.append("suppression_lifted")
        if wanted.unsubscribe_everywhere:
            left = await self._unsubscribe(conn, subscriber, None)
            if left:
                decisions.append(f"unsubscribed:{left}")
        return decisions

    async def _suppress(
        self,
        conn: AsyncConnection,
        subscriber: SubscriberRow,
        current: str | None,
        reason: str,
        actor: str,
        now: datetime,
    ) -> None:
        """Suppress the address for `reason`, or strengthen the reason it is suppressed for."""
        email_hash = subscriber.email_hash
        if current is None:
            await suppression_queries.suppress(
                conn, email_hash, reason=reason, note=None, actor=actor, now=now
            )
        else:
            await suppression_queries.change_reason(
                conn, email_hash, reason=reason, actor=actor, now=now
            )
        await subscriber_event(self._ctx, conn, "subscriber.suppressed", subscriber, reason=reason)

    async def _lift(
        self, conn: AsyncConnection, email_hash: str, actor: str, now: datetime
    ) -> None:
        """A delivery after soft bounces lifts their suppression (and no other)."""
        await suppression_queries.lift(
            conn,
            email_hash,
            note="delivered after the soft bounces",
            actor=actor,
            now=now,
            only_reason="soft_bounce",
        )

    async def _unsubscribe(
        self, conn: AsyncConnection, subscriber: SubscriberRow, campaign_id: int | None
    ) -> int:
        """Leave every newsletter (a complaint, a provider-side unsubscribe of unknown
        origin) or only the campaign's; returns how many subscriptions ended."""
        newsletter_id = None
        if campaign_id is not None:
            newsletter_id = await recipient_outcomes.newsletter_of(conn, campaign_id)
        left = 0
        for subscription, _slug, _name in await subscription_queries.of_subscriber(
            conn, subscriber.id
        ):
            if newsletter_id is not None and subscription.newsletter_id != newsletter_id:
                continue
            if subscription.unsubscribed_at is None:
                await self._flows.unsubscribe_in(conn, subscription)
                left += 1
        return left

    async def _announce(
        self,
        conn: AsyncConnection,
        event: ReportedEvent,
        kind: EventKind,
        subscriber: SubscriberRow,
        target: Target,
        record: AddressRecord,
    ) -> None:
        """The webhooks a bounce or a complaint owes: `subscriber.bounced`, `.complained`."""
        if kind in (EventKind.HARD_BOUNCE, EventKind.SOFT_BOUNCE):
            await subscriber_event(
                self._ctx,
                conn,
                "subscriber.bounced",
                subscriber,
                bounce="hard" if kind is EventKind.HARD_BOUNCE else "soft",
                code=event.code,
                campaign_id=target.campaign_id,
                soft_bounces_counted=len(record.soft_bounces),
            )
        elif kind is EventKind.COMPLAINT:
            await subscriber_event(
                self._ctx, conn, "subscriber.complained", subscriber, campaign_id=target.campaign_id
            )

    async def _history(
        self,
        conn: AsyncConnection,
        event: ReportedEvent,
        email_hash: str,
        target: Target,
        decision: str,
    ) -> None:
        await queries.add_history(
            conn,
            email_hash=email_hash,
            event=event.kind.value if event.kind else "other",
            decision=decision[:32],
            source=event.source,
            campaign_id=target.campaign_id,
            code=storable(event.code),
            diagnostic=storable(event.diagnostic),
            occurred_at=event.occurred_at,
            created_at=self._ctx.now(),
        )


@overload
def storable(text: str) -> str: ...
@overload
def storable(text: None) -> None: ...
def storable(text: str | None) -> str | None:
    """Remote text as a database can hold it: PostgreSQL refuses NUL characters."""
    return None if text is None else text.replace("\x00", "\ufffd")


def _domain_event(event: ReportedEvent, kind: EventKind) -> FeedbackEvent:
    return FeedbackEvent(kind, event.occurred_at, f"{event.source}:{event.event_key}", event.code)


def _counted(kind: EventKind, record: AddressRecord) -> str:
    if kind is EventKind.SOFT_BOUNCE:
        return f"counted:{len(record.soft_bounces)}"
    return "recorded"
