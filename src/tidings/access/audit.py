"""The audit log (UI-2): who did what, when, from where. Entries are appended by the use
cases that act (sign-ins, operator and key changes) and by the routes that send, cancel,
delete and import; they are read by the audit page and `tidings audit list`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from tidings.domain.audit import Actor
from tidings.observability.logging import get_logger
from tidings.storage import audit as queries
from tidings.storage.audit import AuditRow
from tidings.storage.database import Database

log = get_logger(__name__)
MAX_TARGET_LENGTH = 200


class AuditLog:
    def __init__(self, db: Database, now: Callable[[], datetime]) -> None:
        self._db = db
        self._now = now

    async def record(
        self,
        actor: Actor,
        action: str,
        target: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Append one entry. `target` is an id (`admin:3`, `campaign:7`), never an email."""
        async with self._db.write() as conn:
            await queries.insert_entry(
                conn,
                now=self._now(),
                actor=actor.label,
                action=action,
                target=target[:MAX_TARGET_LENGTH] if target else None,
                client_ip=actor.client_ip,
                detail=detail,
            )
        log.info("audit.recorded", action=action, actor=actor.label, target=target)

    async def list(
        self,
        *,
        action: str | None = None,
        actor: str | None = None,
        since: datetime | None = None,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[AuditRow]:
        async with self._db.read() as conn:
            return await queries.list_entries(
                conn, action=action, actor=actor, since=since, before_id=before_id, limit=limit
            )
