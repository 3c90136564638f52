"""The local capture provider (PRV-3): the default when no relay is configured. Messages are
stored in the database, readable with `tidings outbox` and the admin API, so the whole path
works before anyone supplies credentials."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from email.parser import BytesHeaderParser
from email.policy import default as default_policy

from tidings.delivery.provider import Envelope, SendResult
from tidings.domain.errors import NotFound
from tidings.storage import outbox
from tidings.storage.database import Database
from tidings.storage.outbox import CapturedMessage


class CaptureProvider:
    name = "capture"

    def __init__(self, db: Database, now: Callable[[], datetime]) -> None:
        self._db = db
        self._now = now

    async def send(self, envelope: Envelope) -> SendResult:
        headers = BytesHeaderParser(policy=default_policy).parsebytes(envelope.data)
        async with self._db.write() as conn:
            captured_id = await outbox.insert_captured(
                conn,
                message_id=envelope.message_id,
                sender=envelope.sender,
                recipients=list(envelope.recipients),
                subject=str(headers.get("Subject", "")),
                raw=envelope.data,
                now=self._now(),
            )
        return SendResult(accepted=list(envelope.recipients), provider_message_id=str(captured_id))

    async def close(self) -> None:
        return None


class CapturedMail:
    """Reads what the capture provider stored (`tidings outbox`, the admin API)."""

    def __init__(self, db: Database, now: Callable[[], datetime], *, retention: timedelta) -> None:
        self._db = db
        self._now = now
        self._retention = retention

    async def prune(self) -> int:
        """Forget captured mail older than the retention (it holds addresses and content)."""
        removed = 0
        while True:
            async with self._db.write() as conn:
                batch = await outbox.prune_captured(
                    conn, before=self._now() - self._retention, batch=1000
                )
            removed += batch
            if batch < 1000:
                return removed

    async def list(self, *, before_id: int | None = None, limit: int = 50) -> list[CapturedMessage]:
        async with self._db.read() as conn:
            return await outbox.list_captured(conn, before_id=before_id, limit=limit)

    async def get(self, message_id: int) -> CapturedMessage:
        async with self._db.read() as conn:
            found = await outbox.get_captured(conn, message_id)
        if found is None:
            raise NotFound(f"no captured message with id {message_id}")
        return found
