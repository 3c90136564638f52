"""Recording what is heard back (PRV-6, AUD-13): a reported event is recorded once, tied to
its subscriber and campaign recipient, and handed to the verdict (`verdict.py`); deliveries,
the bulk of all events, by group commit (`group_commit.py`). Unreadable and unverified reports
are kept for the operator, who reviews the unverified ones here.

All of it happens in one transaction, so a provider hears 2xx only once the event and what it
changed are durable. Logs carry kinds, sources and ids; never the address or the diagnostic.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from enum import StrEnum
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.audience.context import AudienceContext
from tidings.audience.hearing.group_commit import GroupCommit
from tidings.audience.hearing.verdict import CampaignWatch, Target, Verdict, storable
from tidings.audience.public import PublicFlows
from tidings.domain.audience import Address, normalise_email
from tidings.domain.email_headers import campaign_of_message_id, names_a_campaign
from tidings.domain.errors import Conflict, InvalidInput, NotFound
from tidings.domain.feedback import BouncePolicy, EventKind, ReportedEvent
from tidings.storage import delivered_events, transactional_outcomes
from tidings.storage import feedback as queries
from tidings.storage import subscribers as subscriber_queries
from tidings.storage.sending import recipient_outcomes

log = structlog.get_logger("tidings.feedback")
MAX_UNPARSED_BYTES = 65_536


class Outcome(StrEnum):
    APPLIED = "applied"  # about a subscriber: recorded and acted on
    UNMATCHED = "unmatched"  # about no subscriber: recorded and counted, nothing changed
    IGNORED = "ignored"  # a kind the policy does not act on (opened, clicked...)
    DUPLICATE = "duplicate"  # this event id was heard before: nothing to do
    UNPARSED = "unparsed"  # kept for the operator
    UNVERIFIED = "unverified"  # a report by mail nothing authenticates: kept for the operator
    CONFIRMED = "confirmed"  # an SNS subscription confirmed (no event)


# What a received event may be listed by (`duplicate` and `confirmed` are never stored).
LISTED_STATUSES = ("applied", "unmatched", "ignored", "unparsed", "unverified")


class ReplayedEvent(Conflict):
    """The signature token was already used by another event: a replay, refused."""

    code = "event_replayed"
    title = "The event's signature was already used"


class Feedback:
    def __init__(
        self,
        context: AudienceContext,
        flows: PublicFlows,
        policy: BouncePolicy,
        *,
        retention: timedelta,
        on_event: Callable[[str, str, str], None] = lambda source, kind, outcome: None,
        watch_campaign: CampaignWatch | None = None,
    ) -> None:
        self._ctx = context
        self._verdict = Verdict(context, flows, policy, watch_campaign)
        self.policy = policy
        self._retention = retention
        self._on_event = on_event
        # Deliveries, the bulk of all events, are written by group commit (group_commit.py).
        self._deliveries: GroupCommit[ReportedEvent, Outcome] = GroupCommit(
            self._apply_deliveries, self._receive_alone
        )

    async def receive(self, event: ReportedEvent) -> Outcome:
        """Record `event` and carry out what it means, durably before returning; raises
        `ReplayedEvent` for a reused signature token (nothing recorded)."""
        if event.kind is EventKind.DELIVERED and event.recipient_id is None:
            outcome = await self._deliveries.submit(event)
        else:
            outcome = await self._receive_alone(event)
        self.counted(event.source, event.kind.value if event.kind else "other", outcome)
        return outcome

    async def close(self) -> None:
        await self._deliveries.close()

    async def _receive_alone(self, event: ReportedEvent) -> Outcome:
        async with self._ctx.db.write() as conn:
            return await self._receive(conn, event)

    async def receive_many(self, events: list[ReportedEvent]) -> list[Outcome]:
        """Several events in one transaction (the generic form posts up to 1,000)."""
        async with self._ctx.db.write() as conn:
            outcomes = [await self._receive(conn, event) for event in events]
        for event, outcome in zip(events, outcomes, strict=True):
            self.counted(event.source, event.kind.value if event.kind else "other", outcome)
        return outcomes

    async def record_unparsed(
        self,
        *,
        source: str,
        event_key: str,
        body: bytes,
        token: str | None,
        reason: str,
        status: Outcome = Outcome.UNPARSED,
        kind: EventKind | None = None,
    ) -> Outcome:
        """Keep an event for the operator, acting on nobody: one nobody could read
        (`unparsed`), or a report by mail that nothing authenticates (`unverified`, PRV-6:
        what it claims is shown, and the operator may apply or discard it)."""
        async with self._ctx.db.write() as conn:
            recorded = await queries.record_event(
                conn,
                source=source,
                event_key=event_key[:255],
                token=token,
                kind=kind.value if kind else None,
                status=status.value,
                diagnostic=storable(reason[:500]),
                payload=storable(body[:MAX_UNPARSED_BYTES].decode("utf-8", "replace")),
                received_at=self._ctx.now(),
            )
        if recorded == "replayed":
            raise ReplayedEvent()
        outcome = status if recorded == "new" else Outcome.DUPLICATE
        self.counted(source, status.value if kind is None else kind.value, outcome)
        return outcome

    async def review(
        self,
        event_id: int,
        *,
        actor: str,
        reading: Callable[[str], list[ReportedEvent]] | None,
    ) -> list[Outcome]:
        """The operator's decision on an unverified report: applied (`reading` turns its kept
        body into the events it claims, carried out as any event is, under the operator's
        authority) or discarded (`reading` None). One transaction: the decision is recorded
        with what it did, or not at all. Raises `NotFound` when no such report waits."""
        decision = "discarded" if reading is None else "applied"
        async with self._ctx.db.write() as conn:
            row = await queries.mark_reviewed(
                conn, event_id, decision=decision, actor=actor, now=self._ctx.now()
            )
            if row is None:
                raise NotFound(f"no unverified report {event_id} waits for review")
            events = [] if reading is None else reading(row.payload or "")
            outcomes = [await self._receive(conn, event) for event in events]
        for event, outcome in zip(events, outcomes, strict=True):
            self.counted(event.source, event.kind.value if event.kind else "other", outcome)
        log.info("inbound.reviewed", event_id=event_id, decision=decision, events=len(events))
        return outcomes

    async def mail_addressee(self, job_id: int) -> tuple[str, str | None] | None:
        """The message key of transactional mail job `job_id` and the address it went to."""
        async with self._ctx.db.read() as conn:
            return await transactional_outcomes.addressee(conn, job_id)

    async def purge(self) -> int:
        """Drop received events older than the retention period (decisions stay on history)."""
        async with self._ctx.db.write() as conn:
            return await queries.purge_events(conn, before=self._ctx.now() - self._retention)

    async def history(self, email_hash: str) -> list[dict[str, Any]]:
        async with self._ctx.db.read() as conn:
            return await queries.history_of(conn, email_hash)

    async def events(
        self,
        *,
        status: str | None,
        after_id: int | None,
        limit: int,
        awaiting_review: bool = False,
    ) -> list[queries.InboundEventRow]:
        if status is not None and status not in LISTED_STATUSES:
            raise InvalidInput(
                f"status must be one of {', '.join(LISTED_STATUSES)}", field="status"
            )
        async with self._ctx.db.read() as conn:
            return await queries.list_events(
                conn,
                status=status,
                after_id=after_id,
                limit=limit,
                awaiting_review=awaiting_review,
            )

    def counted(self, source: str, kind: str, outcome: Outcome) -> None:
        """Count (metrics) and log one event heard; never the address."""
        self._on_event(source, kind, outcome.value)
        log.info("inbound.event", source=source, kind=kind, outcome=outcome.value)

    # -- one event ------------------------------------------------------------------------

    async def _receive(self, conn: AsyncConnection, event: ReportedEvent) -> Outcome:
        target = await self._target(conn, event)
        if target.subscriber is None:
            status = Outcome.UNMATCHED
        elif event.kind is None:
            status = Outcome.IGNORED
        else:
            status = Outcome.APPLIED
        recorded = await queries.record_event(
            conn,
            source=event.source,
            event_key=event.event_key,
            token=event.token,
            kind=event.kind.value if event.kind else None,
            status=status.value,
            email_hash=target.email_hash,
            campaign_id=target.campaign_id,
            recipient_id=target.recipient_id,
            occurred_at=event.occurred_at,
            code=storable(event.code),
            diagnostic=storable(event.diagnostic),
            received_at=self._ctx.now(),
        )
        if recorded == "replayed":
            raise ReplayedEvent()
        if recorded == "duplicate":
            return Outcome.DUPLICATE
        if event.kind is not None and event.message_id and target.campaign_id is None:
            # Not a campaign's message: perhaps a transactional one (a subscriber's or not).
            await transactional_outcomes.record_outcome(
                conn, event.message_id, kind=event.kind.value, at=event.occurred_at, code=event.code
            )
        if status is Outcome.APPLIED:
            assert target.subscriber is not None
            assert event.kind is not None
            await self._verdict.apply(conn, event, event.kind, target, target.subscriber)
        return status

    async def _apply_deliveries(self, events: list[ReportedEvent]) -> list[Outcome | Exception]:
        """`_receive` for many `delivered` events in one transaction, with one statement on
        PostgreSQL whatever their number (`storage/delivered_events.py`); only what a delivery
        may change beyond its rows (an address with a bounce record, a transactional message)
        and a Message-ID made for another spelling of the address are taken one by one."""
        outcomes: list[Outcome | Exception] = [Outcome.DUPLICATE] * len(events)
        batch: list[tuple[int, delivered_events.DeliveredEvent]] = []
        alone: list[int] = []
        first: set[tuple[str, str]] = set()
        for index, event in enumerate(events):
            if (event.source, event.event_key) in first:
                continue  # the same event twice in one batch: the second is a duplicate
            first.add((event.source, event.event_key))
            address = _address(event.address)
            campaign_id = None
            if address is not None and event.message_id:
                campaign_id = campaign_of_message_id(event.message_id, address.email)
                if campaign_id is None and names_a_campaign(event.message_id):
                    alone.append(index)  # perhaps made for the address as the reader wrote it
                    continue
            batch.append((index, self._delivered(event, address, campaign_id)))
        async with self._ctx.db.write() as conn:
            records = await delivered_events.record_delivered(
                conn, [given for _, given in batch], received_at=self._ctx.now()
            )
            for (index, _), record in zip(batch, records, strict=True):
                if record.recorded == "replayed":
                    outcomes[index] = ReplayedEvent()
                elif record.recorded == "new":
                    outcomes[index] = await self._delivered_beyond_rows(conn, events[index], record)
            for index in alone:
                try:
                    outcomes[index] = await self._receive(conn, events[index])
                except ReplayedEvent as replayed:
                    outcomes[index] = replayed
        return outcomes

    def _delivered(
        self, event: ReportedEvent, address: Address | None, campaign_id: int | None
    ) -> delivered_events.DeliveredEvent:
        return delivered_events.DeliveredEvent(
            source=event.source,
            event_key=event.event_key,
            token=event.token,
            email_key=address.key if address else None,
            email=address.email if address else None,
            email_hash=self._ctx.email_hash(address.key) if address else None,
            campaign_id=campaign_id,
            message_key=transactional_outcomes.key_of(event.message_id)
            if event.message_id
            else None,
            occurred_at=event.occurred_at,
            code=storable(event.code),
            diagnostic=storable(event.diagnostic),
        )

    async def _delivered_beyond_rows(
        self, conn: AsyncConnection, event: ReportedEvent, record: delivered_events.DeliveredRecord
    ) -> Outcome:
        """What a new delivery changes besides its own rows: a transactional message's
        outcome, and the verdict on an address with a bounce record (`Verdict`)."""
        if record.transactional and event.message_id:
            await transactional_outcomes.record_outcome(
                conn, event.message_id, kind="delivered", at=event.occurred_at, code=None
            )
        if record.subscriber_id is None:
            return Outcome.UNMATCHED
        if record.has_record:
            subscriber = await subscriber_queries.get(conn, record.subscriber_id)
            if subscriber is not None:
                target = Target(
                    subscriber, record.email_hash, record.campaign_id, record.recipient_id
                )
                await self._verdict.apply(conn, event, EventKind.DELIVERED, target, subscriber)
        return Outcome.APPLIED

    async def _target(self, conn: AsyncConnection, event: ReportedEvent) -> Target:
        """The subscriber and campaign recipient the event is about, as far as known."""
        if event.recipient_id is not None:
            # A VERP return path whose MAC verified names the row, and only the row: the
            # addresses the report itself names are whatever its sender wrote (PRV-6).
            found = await recipient_outcomes.recipient_by_id(conn, event.recipient_id)
            if found is None or found[1] is None:
                return Target(None, None, None, None)
            subscriber = await subscriber_queries.get(conn, found[1])
            if subscriber is None:
                return Target(None, None, None, None)
            return Target(subscriber, subscriber.email_hash, found[0], event.recipient_id)
        if event.address is None:
            return Target(None, None, None, None)
        try:
            address = normalise_email(event.address)
        except InvalidInput:
            return Target(None, None, None, None)
        email_hash = self._ctx.email_hash(address.key)
        subscriber = await subscriber_queries.get_by_key(conn, address.key)
        if subscriber is None:
            return Target(None, email_hash, None, None)
        campaign_id = None
        if event.message_id is not None:
            campaign_id = campaign_of_message_id(event.message_id, subscriber.email)
        recipient_id = None
        if campaign_id is not None:
            recipient_id = await recipient_outcomes.recipient_of(conn, campaign_id, subscriber.id)
        return Target(subscriber, subscriber.email_hash, campaign_id, recipient_id)


def _address(address: str | None) -> Address | None:
    if address is None:
        return None
    try:
        return normalise_email(address)
    except InvalidInput:
        return None
