"""Provider event intake (PRV-6): a webhook body is checked (size, signature, age, replay),
read into provider-neutral events, and handed to `Feedback`. An authentic body nobody can
read is kept as unparsed; a forged, stale or replayed one changes nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from tidings.audience.hearing.recording import Feedback, Outcome
from tidings.delivery import mailgun_events, sns
from tidings.delivery.event_webhooks import MalformedEvent, SignatureRejected
from tidings.delivery.sns import SnsCertificates
from tidings.domain.errors import InvalidInput, NotFound, PayloadTooLarge
from tidings.domain.feedback import EventKind, ReportedEvent

GENERIC_SOURCE = "api"
MAX_GENERIC_EVENTS = 1000
GENERIC_KINDS = tuple(kind.value for kind in EventKind)


@dataclass(frozen=True, slots=True)
class GenericEvent:
    """One event of the documented generic JSON form (`POST /api/admin/events`)."""

    id: str
    type: str
    email: str
    occurred_at: datetime
    message_id: str | None = None
    code: str | None = None
    diagnostic: str | None = None


class ProviderEvents:
    def __init__(
        self,
        feedback: Feedback,
        *,
        mailgun_signing_key: str | None,
        max_age_seconds: int,
        max_bytes: int,
        sns: SnsCertificates | None = None,
        ses_topics: frozenset[str] = frozenset(),
    ) -> None:
        self._feedback = feedback
        self._mailgun_key = mailgun_signing_key
        self._sns = sns
        self._ses_topics = ses_topics
        self._max_age = max_age_seconds
        self.max_bytes = max_bytes

    def check_size(self, size: int) -> None:
        if size > self.max_bytes:
            raise PayloadTooLarge(f"an event body is at most {self.max_bytes} bytes")

    async def mailgun(self, body: bytes, *, now: datetime) -> Outcome:
        """One Mailgun webhook request."""
        if self._mailgun_key is None:
            raise NotFound("Mailgun events are not configured (mailgun.webhook_signing_key)")
        self.check_size(len(body))
        signed = mailgun_events.verify(
            body, signing_key=self._mailgun_key, now=now, max_age_seconds=self._max_age
        )
        try:
            event = mailgun_events.parse(signed)
        except MalformedEvent as exc:
            return await self._feedback.record_unparsed(
                source=mailgun_events.SOURCE,
                event_key="unparsed:" + hashlib.sha256(body).hexdigest(),
                body=body,
                token=signed.token,
                reason=str(exc),
            )
        return await self._feedback.receive(event)

    async def ses(self, body: bytes, *, now: datetime) -> Outcome:
        """One SNS message about SES: a subscription to confirm, or notifications."""
        if self._sns is None or not self._ses_topics:
            raise NotFound("SES events are not configured (ses.topic_arns)")
        self.check_size(len(body))
        message = sns.read_message(body)
        if message.get("TopicArn") not in self._ses_topics:
            raise SignatureRejected("the topic is not one of ses.topic_arns")
        await self._sns.verify(message, now=now, max_age_seconds=self._max_age)
        if message["Type"] == "SubscriptionConfirmation":
            await self._sns.confirm(message)
            self._feedback.counted(sns.SOURCE, "subscription", Outcome.CONFIRMED)
            return Outcome.CONFIRMED
        if message["Type"] != "Notification":
            self._feedback.counted(sns.SOURCE, "other", Outcome.IGNORED)
            return Outcome.IGNORED
        try:
            events = sns.ses_events(message)
        except MalformedEvent as exc:
            return await self._feedback.record_unparsed(
                source=sns.SOURCE,
                event_key="unparsed:" + str(message.get("MessageId"))[:200],
                body=body,
                token=None,
                reason=str(exc),
            )
        if not events:
            self._feedback.counted(sns.SOURCE, "other", Outcome.IGNORED)
            return Outcome.IGNORED
        outcomes = await self._feedback.receive_many(events)
        return next((o for o in outcomes if o is Outcome.APPLIED), outcomes[0])

    async def generic(self, events: list[GenericEvent]) -> list[Outcome]:
        """Events in the generic form, from any other provider or a bridge (admin key)."""
        if not events:
            raise InvalidInput("send at least one event", field="events")
        if len(events) > MAX_GENERIC_EVENTS:
            raise InvalidInput(f"at most {MAX_GENERIC_EVENTS} events per request", field="events")
        reported = []
        for number, event in enumerate(events):
            if event.type not in GENERIC_KINDS:
                raise InvalidInput(
                    f"events[{number}].type must be one of {', '.join(GENERIC_KINDS)}",
                    field=f"events.{number}.type",
                )
            if event.occurred_at.tzinfo is None:
                raise InvalidInput(
                    f"events[{number}].occurred_at needs a timezone",
                    field=f"events.{number}.occurred_at",
                )
            reported.append(
                ReportedEvent(
                    source=GENERIC_SOURCE,
                    event_key=event.id,
                    kind=EventKind(event.type),
                    address=event.email,
                    occurred_at=event.occurred_at,
                    code=event.code,
                    diagnostic=event.diagnostic,
                    message_id=event.message_id,
                )
            )
        return await self._feedback.receive_many(reported)
