"""Mail that comes back (PRV-6): bounces to the VERP return path, ARF complaints and mail to
the `List-Unsubscribe` mailto address, received by `tidings inbound` and turned into the same
events the provider webhooks give (`Feedback`). Anything unrecognised is kept, never lost.

Only an authenticated report acts on anyone. The MX takes mail from the whole internet, so a
bounce or a complaint acts only when it names a VERP address whose MAC verifies — its envelope
recipient, or the return path of the original message it quotes (a feedback loop's report) —
and then only on the recipient row that address names. Everything else (the bare bounce
address, a wrong MAC, a Message-ID alone: its formula is public) is kept as `unverified` for
the operator to apply or discard, unless `inbound.act_on_unverified_reports` says the relay is
closed. An unsubscribe acts only through its signed token.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from tidings.audience.hearing.recording import Feedback, Outcome
from tidings.audience.public import LinkProblem, PublicFlows
from tidings.delivery.imap_mailbox import OpenMailbox
from tidings.delivery.inbound_mail import MailReport, read_report, stored_recipients
from tidings.domain import verp
from tidings.domain.clock import Clock
from tidings.domain.errors import InvalidInput
from tidings.domain.feedback import EventKind, ReportedEvent

SOURCE = "smtp"
# The source of the events an operator applies from an unverified report.
REVIEWED_SOURCE = "operator"


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
        act_on_unverified: bool = False,
    ) -> None:
        self._feedback = feedback
        self._flows = flows
        self._clock = clock
        self._secret = secret
        self.bounce_address = bounce_address
        self.unsubscribe_address = unsubscribe_address
        self.max_bytes = max_bytes
        self._act_on_unverified = act_on_unverified

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
        headers; one for none of tidings' addresses is taken as sent to the bounce address.
        Mail addressed to the unsubscribe address is read as such whatever `Delivered-To`
        says (an alias may have brought it into the bounce mailbox)."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if len(data) > self.max_bytes:
            reason = "larger than inbound.max_event_bytes"
            report = MailReport("unknown", digest, reason=reason)
            return [await self._unparsed(report, data, reason)]
        recipients = [address for address in stored_recipients(data) if self.accepts(address)]
        recipients.sort(key=lambda address: not self._is_unsubscribe(address))
        if not recipients and self.bounce_address is not None:
            recipients = [self.bounce_address]
        if not recipients:
            report = MailReport("unknown", digest, reason="for none of tidings' addresses")
            return [await self._unparsed(report, data, report.reason)]
        return await self.receive(recipients[:1], data)

    async def review(self, event_id: int, *, apply: bool, actor: str) -> list[Outcome]:
        """The operator applies or discards unverified report `event_id`. Applying acts on
        the addresses the kept report names, as `act_on_unverified_reports` would have."""

        def reading(payload: str) -> list[ReportedEvent]:
            report = read_report(
                payload.encode("utf-8", "replace"),
                report_id=f"review:{event_id}",
                to_unsubscribe=False,
            )
            events = self._events(report, None, source=REVIEWED_SOURCE)
            if not events:
                reason = report.reason or "it names no address"
                raise InvalidInput(f"the report cannot be applied: {reason}", field="event_id")
            return events

        return await self._feedback.review(
            event_id, actor=actor, reading=reading if apply else None
        )

    async def _apply(self, report: MailReport, tag: str | None, data: bytes) -> Outcome:
        if report.kind == "unsubscribe":
            assert report.unsubscribe_token is not None
            try:
                await self._flows.unsubscribe(report.unsubscribe_token)
            except LinkProblem:
                return await self._unparsed(report, data, "the unsubscribe token is not valid")
            self._feedback.counted(SOURCE, EventKind.UNSUBSCRIBE.value, Outcome.APPLIED)
            return Outcome.APPLIED
        if report.kind not in ("bounce", "complaint"):
            return await self._unparsed(report, data, report.reason or "no one to attribute it to")
        quoted = self._tag(report.original_return_path)
        recipient_id = self._verified(tag) or self._verified(quoted)
        job_id = None if recipient_id is not None else self._mail_job(tag) or self._mail_job(quoted)
        if job_id is not None:  # transactional mail: about the address the job mailed
            sent = await self._feedback.mail_addressee(job_id)
            events = self._mail_events(report, *(sent or (None, None)))
            outcomes = await self._feedback.receive_many(events)
            return outcomes[0]
        if recipient_id is None and not self._act_on_unverified:
            return await self._feedback.record_unparsed(
                source=SOURCE,
                event_key=report.report_id,
                body=data,
                token=None,
                reason=_why_unverified(tag, report),
                status=Outcome.UNVERIFIED,
                kind=_claimed_kind(report),
            )
        events = self._events(report, recipient_id, source=SOURCE)
        if not events:
            return await self._unparsed(report, data, "no one to attribute it to")
        outcomes = await self._feedback.receive_many(events)
        applied = [o for o in outcomes if o is Outcome.APPLIED]
        return applied[0] if applied else outcomes[0]

    def _events(
        self, report: MailReport, recipient_id: int | None, *, source: str
    ) -> list[ReportedEvent]:
        """The events a bounce or complaint reports. With `recipient_id` (a verified VERP
        address) one event about that row alone, whatever addresses the report names; without
        it, one per address the report names."""
        now = self._clock()
        if report.kind == "complaint":
            if recipient_id is None and report.complainant is None:
                return []
            return [
                ReportedEvent(
                    source=source,
                    event_key=report.report_id,
                    kind=EventKind.COMPLAINT,
                    address=None if recipient_id is not None else report.complainant,
                    occurred_at=now,
                    message_id=report.original_message_id,
                    recipient_id=recipient_id,
                )
            ]
        failures = report.failures[:1] if recipient_id is not None else report.failures
        return [
            ReportedEvent(
                source=source,
                event_key=f"{report.report_id}:{failure.address or recipient_id}"[:255],
                kind=EventKind.HARD_BOUNCE if failure.permanent else EventKind.SOFT_BOUNCE,
                address=None if recipient_id is not None else failure.address,
                occurred_at=now,
                code=failure.code,
                diagnostic=failure.diagnostic,
                message_id=report.original_message_id,
                recipient_id=recipient_id,
            )
            for failure in failures
        ]

    def _mail_events(
        self, report: MailReport, message_key: str | None, address: str | None
    ) -> list[ReportedEvent]:
        """The one event a report about transactional mail makes: about the address the job
        mailed (from our own rows, not the report) and its message."""
        if report.kind == "complaint":
            kind = EventKind.COMPLAINT
        else:
            kind = EventKind.HARD_BOUNCE if report.failures[0].permanent else EventKind.SOFT_BOUNCE
        failure = report.failures[0] if report.failures else None
        return [
            ReportedEvent(
                source=SOURCE,
                event_key=report.report_id,
                kind=kind,
                address=address,
                occurred_at=self._clock(),
                code=failure.code if failure else None,
                diagnostic=failure.diagnostic if failure else None,
                message_id=message_key,
            )
        ]

    async def _unparsed(self, report: MailReport, data: bytes, reason: str) -> Outcome:
        return await self._feedback.record_unparsed(
            source=SOURCE, event_key=report.report_id, body=data, token=None, reason=reason
        )

    def _verified(self, tag: str | None) -> int | None:
        """The recipient row a VERP tag names, when its MAC verifies."""
        return verp.recipient_of(tag, self._secret()) if tag else None

    def _mail_job(self, tag: str | None) -> int | None:
        """The transactional mail job a VERP tag names, when its MAC verifies."""
        return verp.mail_job_of(tag, self._secret()) if tag else None

    def _is_unsubscribe(self, recipient: str) -> bool:
        address = recipient.strip().strip("<>").lower()
        return self.unsubscribe_address is not None and address == self.unsubscribe_address.lower()

    def _tag(self, recipient: str | None) -> str | None:
        if self.bounce_address is None or recipient is None:
            return None
        return verp.tag_of(recipient, self.bounce_address)


def _claimed_kind(report: MailReport) -> EventKind:
    if report.kind == "complaint":
        return EventKind.COMPLAINT
    permanent = any(failure.permanent for failure in report.failures)
    return EventKind.HARD_BOUNCE if permanent else EventKind.SOFT_BOUNCE


def _why_unverified(tag: str | None, report: MailReport) -> str:
    """Why a report cannot act by itself, for the operator (no address: it may be logged)."""
    if tag:
        return "unverified: the VERP address's MAC does not verify"
    if report.original_return_path:
        return "unverified: the quoted return path carries no valid VERP MAC"
    if tag == "":
        return "unverified: sent to the bare bounce address, with no VERP MAC"
    return "unverified: no VERP address names the recipient"
