"""Mail that comes back (PRV-6): bounces to the VERP return path, ARF complaints and mail to
the `List-Unsubscribe` mailto address, received by `tidings inbound` and turned into the same
events the provider webhooks give (`Feedback`). Anything unrecognised is kept, never lost.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from tidings.audience.feedback import Feedback, Outcome
from tidings.audience.public import LinkProblem, PublicFlows
from tidings.delivery.imap_mailbox import OpenMailbox
from tidings.delivery.inbound_mail import MailReport, read_report, stored_recipients
from tidings.domain import verp
from tidings.domain.clock import Clock
from tidings.domain.feedback import EventKind, ReportedEvent

SOURCE = "smtp"


class InboundMail:
    def __init__(
        self,
        feedback: Feedback,
        flows: PublicFlows,
        *,
        clock: Clock,
        secret: Callable[[], str],
        bounce_address: str | None,
        unsubscribe_address: str | None,
        max_bytes: int,
    ) -> None:
        self._feedback = feedback
        self._flows = flows
        self._clock = clock
        self._secret = secret
        self.bounce_address = bounce_address
        self.unsubscribe_address = unsubscribe_address
        self.max_bytes = max_bytes

    def accepts(self, recipient: str) -> bool:
        """Is `recipient` an address tidings reads (the bounce address, tagged or not, or
        the unsubscribe address)? Others are refused at RCPT."""
        return self._is_unsubscribe(recipient) or self._tag(recipient) is not None

    async def receive(self, recipients: list[str], data: bytes) -> list[Outcome]:
        """Act on one message, once per recipient it was delivered to."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        outcomes = []
        for recipient in recipients:
            report = read_report(
                data, report_id=digest, to_unsubscribe=self._is_unsubscribe(recipient)
            )
            outcomes.append(await self._apply(report, self._tag(recipient), data))
        return outcomes

    async def drain(self, mailbox: OpenMailbox) -> dict[str, int]:
        """Act on every message of a polled bounce mailbox, then delete them there (each is
        recorded first: what cannot be read is kept as unparsed); outcomes counted."""
        counted: dict[str, int] = {}
        done = []
        for uid in await mailbox.uids():
            data = await mailbox.fetch(uid)
            if data is not None:
                for outcome in await self.receive_stored(data):
                    counted[outcome.value] = counted.get(outcome.value, 0) + 1
            done.append(uid)
        await mailbox.remove(done)
        return counted

    async def receive_stored(self, data: bytes) -> list[Outcome]:
        """`receive` for a message taken from a mailbox: its recipients are read from its
        headers; one for none of tidings' addresses is taken as sent to the bounce address
        (a bounce then matched by the failed address)."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if len(data) > self.max_bytes:
            reason = "larger than inbound.max_event_bytes"
            report = MailReport("unknown", digest, reason=reason)
            return [await self._unparsed(report, data, reason)]
        recipients = [address for address in stored_recipients(data) if self.accepts(address)]
        if not recipients and self.bounce_address is not None:
            recipients = [self.bounce_address]
        if not recipients:
            report = MailReport("unknown", digest, reason="for none of tidings' addresses")
            return [await self._unparsed(report, data, report.reason)]
        return await self.receive(recipients[:1], data)

    async def _apply(self, report: MailReport, tag: str | None, data: bytes) -> Outcome:
        recipient_id = verp.recipient_of(tag, self._secret()) if tag else None
        now = self._clock()
        if report.kind == "unsubscribe":
            assert report.unsubscribe_token is not None
            try:
                await self._flows.unsubscribe(report.unsubscribe_token)
            except LinkProblem:
                return await self._unparsed(report, data, "the unsubscribe token is not valid")
            self._feedback.counted(SOURCE, EventKind.UNSUBSCRIBE.value, Outcome.APPLIED)
            return Outcome.APPLIED
        if report.kind == "complaint" and (report.complainant or recipient_id):
            event = ReportedEvent(
                source=SOURCE,
                event_key=report.report_id,
                kind=EventKind.COMPLAINT,
                address=report.complainant,
                occurred_at=now,
                message_id=report.original_message_id,
                recipient_id=recipient_id,
            )
            return await self._feedback.receive(event)
        if report.kind == "bounce":
            failures = report.failures
            if recipient_id is not None:  # the return path says whom: one event
                failures = failures[:1]
            events = [
                ReportedEvent(
                    source=SOURCE,
                    event_key=f"{report.report_id}:{failure.address or recipient_id}"[:255],
                    kind=EventKind.HARD_BOUNCE if failure.permanent else EventKind.SOFT_BOUNCE,
                    address=failure.address,
                    occurred_at=now,
                    code=failure.code,
                    diagnostic=failure.diagnostic,
                    message_id=report.original_message_id,
                    recipient_id=recipient_id,
                )
                for failure in failures
            ]
            outcomes = await self._feedback.receive_many(events)
            applied = [o for o in outcomes if o is Outcome.APPLIED]
            return applied[0] if applied else outcomes[0]
        return await self._unparsed(report, data, report.reason or "no one to attribute it to")

    async def _unparsed(self, report: MailReport, data: bytes, reason: str) -> Outcome:
        return await self._feedback.record_unparsed(
            source=SOURCE, event_key=report.report_id, body=data, token=None, reason=reason
        )

    def _is_unsubscribe(self, recipient: str) -> bool:
        address = recipient.strip().strip("<>").lower()
        return self.unsubscribe_address is not None and address == self.unsubscribe_address.lower()

    def _tag(self, recipient: str) -> str | None:
        if self.bounce_address is None:
            return None
        return verp.tag_of(recipient, self.bounce_address)
