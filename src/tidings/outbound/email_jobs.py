"""The `send_email` job: one transactional message to one recipient, through the configured
provider, with the provider's failure classes mapped onto the queue's retry rules."""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from email.message import EmailMessage
from email.utils import formataddr, formatdate
from typing import Any, ClassVar

from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.delivery.provider import (
    Envelope,
    PermanentFailure,
    PerRecipientProvider,
    ProviderUnreachable,
    SenderRefused,
    TemporaryFailure,
    UncertainDelivery,
)
from tidings.domain.clock import Clock
from tidings.domain.errors import InvalidInput
from tidings.domain.jobs import GiveUp, RetryLater
from tidings.domain.provider_health import refusal_reason, unreachable_reason
from tidings.queue.job import Job, JobPayload
from tidings.queue.service import JobQueue
from tidings.storage import transactional_outcomes
from tidings.storage.database import Database

SEND_EMAIL = "send_email"


@dataclass(frozen=True, slots=True)
class TransactionalEmail(JobPayload):
    """What a use case asks to send. One recipient: a retry never re-mails anyone else."""

    kind: ClassVar[str] = SEND_EMAIL
    to: str
    subject: str
    text: str
    html: str | None
    sender: str
    sender_name: str | None = None
    reply_to: str | None = None
    message_id: str | None = None
    headers: Mapping[str, str] | None = None

    def to_payload(self) -> dict[str, Any]:
        for field in ("to", "subject", "sender", "sender_name", "reply_to", "message_id"):
            value = getattr(self, field)
            if value is not None and any(ch in value for ch in "\r\n\0"):
                raise InvalidInput("header values must not contain line breaks", field=field)
        return {
            "to": self.to,
            "subject": self.subject,
            "text": self.text,
            "html": self.html,
            "sender": self.sender,
            "sender_name": self.sender_name,
            "reply_to": self.reply_to,
            "message_id": self.message_id,
            "headers": dict(self.headers or {}),
        }

    def envelope(self, *, default_message_id: str, now: datetime) -> Envelope:
        message = EmailMessage()
        message["From"] = formataddr((self.sender_name or "", self.sender))
        message["To"] = self.to
        message["Subject"] = self.subject
        message["Date"] = formatdate(now.timestamp(), usegmt=True)
        message_id = self.message_id or default_message_id
        message["Message-ID"] = message_id
        if self.reply_to:
            message["Reply-To"] = self.reply_to
        for name, value in (self.headers or {}).items():
            message[name] = value
        message.set_content(self.text)
        if self.html:
            message.add_alternative(self.html, subtype="html")
        return Envelope(
            sender=self.sender, recipients=[self.to], data=message.as_bytes(), message_id=message_id
        )


@dataclass(frozen=True, slots=True)
class RawEmail(JobPayload):
    """An already-serialised message (a campaign message, a test send): sent byte for byte."""

    kind: ClassVar[str] = SEND_EMAIL
    sender: str
    to: str
    data: bytes
    message_id: str

    def to_payload(self) -> dict[str, Any]:
        return {
            "raw_b64": base64.b64encode(self.data).decode(),
            "sender": self.sender,
            "to": self.to,
            "message_id": self.message_id,
        }

    @classmethod
    def fields_of(cls, payload: Mapping[str, Any]) -> Mapping[str, Any]:
        fields = {key: value for key, value in payload.items() if key != "raw_b64"}
        return {**fields, "data": base64.b64decode(payload["raw_b64"], validate=True)}

    def envelope(self, *, default_message_id: str, now: datetime) -> Envelope:
        return Envelope(
            sender=self.sender, recipients=[self.to], data=self.data, message_id=self.message_id
        )


def email_of(job: Job) -> TransactionalEmail | RawEmail:
    """The `send_email` job's message: raw bytes, or the parts of a transactional email."""
    payload_type = RawEmail if "raw_b64" in job.payload else TransactionalEmail
    return payload_type.from_job(job)


class EmailJobHandler:
    """Sends one `send_email` job. A whole-request deadline shorter than the lease bounds it."""

    def __init__(
        self,
        provider: PerRecipientProvider,
        clock: Clock,
        *,
        deadline_seconds: float,
        domain: str,
        return_path: Callable[[int], str] | None = None,
    ) -> None:
        self._provider = provider
        self._clock = clock
        self._deadline = deadline_seconds
        self._domain = domain
        self._return_path = return_path  # VERP (PRV-6): the envelope sender names the job

    async def __call__(self, job: Job) -> None:
        await self.deliver(email_of(job), idempotency_key=job.idempotency_key, job_id=job.id)

    async def deliver(
        self, email: TransactionalEmail | RawEmail, *, idempotency_key: str, job_id: int
    ) -> None:
        """Hand one message to the provider, mapping its failure classes onto the queue's
        retry rules. Also used by handlers that render their message at send time."""
        # Stable across retries, so a provider or receiver can recognise a repeat; in the
        # sender's domain, which is the one the message is signed and sent for.
        digest = transactional_outcomes.key_of_job(idempotency_key)
        domain = email.sender.rpartition("@")[2] or self._domain
        envelope = email.envelope(default_message_id=f"<{digest}@{domain}>", now=self._clock())
        if self._return_path is not None:  # so its bounces come back, naming the job
            envelope = replace(envelope, sender=self._return_path(job_id))
        try:
            async with asyncio.timeout(self._deadline):
                result = await self._provider.send(envelope)
        except ProviderUnreachable as exc:  # named with the relay (SND-26)
            endpoint = exc.endpoint or getattr(self._provider, "endpoint", None)
            raise RetryLater(
                unreachable_reason(self._provider.name, endpoint, exc.cause),
                retry_after_seconds=exc.retry_after_seconds,
            ) from None
        except TemporaryFailure as exc:
            raise RetryLater(
                f"{self._provider.name} temporary failure {exc.status or ''}".strip(),
                retry_after_seconds=exc.retry_after_seconds,
            ) from None
        except SenderRefused as exc:  # no retry mends it: given up, named, replayable once fixed
            endpoint = exc.endpoint or getattr(self._provider, "endpoint", None)
            raise GiveUp(refusal_reason(self._provider.name, endpoint, exc.cause)) from None
        except PermanentFailure as exc:
            raise GiveUp(
                f"{self._provider.name} permanent failure {exc.status or ''}".strip()
            ) from None
        except UncertainDelivery as exc:
            # The answer was lost after the message went out. Transactional mail is at least
            # once: retried like a lost SMTP reply, never lost (the duplicate window).
            raise RetryLater(
                f"{self._provider.name} uncertain delivery {exc.status or ''}".strip()
            ) from None
        except TimeoutError:
            raise RetryLater(f"{self._provider.name} deadline exceeded") from None
        for rejection in result.rejected.values():
            # Reply codes only: the reply text usually echoes the address.
            if rejection.permanent:
                raise GiveUp(f"recipient rejected permanently {rejection.status or ''}".strip())
            raise RetryLater(f"recipient deferred {rejection.status or ''}".strip())


class Mailer:
    """Queues transactional email. Inside a caller's transaction (`queue_in`), the email is
    sent if and only if the caller's change commits (PRI-6)."""

    def __init__(self, db: Database, queue: JobQueue) -> None:
        self._db = db
        self._queue = queue

    async def queue_in(
        self, conn: AsyncConnection, email: TransactionalEmail, *, idempotency_key: str
    ) -> tuple[Job, bool]:
        return await self._queued(conn, email, idempotency_key)

    async def queue_raw_in(
        self, conn: AsyncConnection, email: RawEmail, *, idempotency_key: str | None = None
    ) -> tuple[Job, bool]:
        return await self._queued(conn, email, idempotency_key or f"email:{uuid.uuid4().hex}")

    async def _queued(
        self, conn: AsyncConnection, email: TransactionalEmail | RawEmail, key: str
    ) -> tuple[Job, bool]:
        """Enqueue, noting the message so what the provider reports about it lands on it."""
        job, created = await self._queue.enqueue(conn, email.kind, key, email.to_payload())
        await transactional_outcomes.remember(
            conn,
            job_id=job.id,
            idempotency_key=key,
            message_id=email.message_id,
            now=job.created_at,
        )
        return job, created

    async def queue(
        self, email: TransactionalEmail, *, idempotency_key: str | None = None
    ) -> tuple[Job, bool]:
        key = f"email:{idempotency_key}" if idempotency_key else f"email:{uuid.uuid4().hex}"
        async with self._db.write() as conn:
            return await self.queue_in(conn, email, idempotency_key=key)
