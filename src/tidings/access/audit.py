"""The audit log (UI-2): who did what, when, from where. Entries are appended by the use
cases that act (sign-ins, operator and key changes) and by the routes that send, cancel,
delete and import; they are read by the audit page and `tidings audit list`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from tidings.domain.audit import Actor
from tidings.domain.ratelimit import window_start
from tidings.observability.logging import get_logger
from tidings.storage import audit as queries
from tidings.storage.audit import AuditRow
from tidings.storage.database import Database
from tidings.storage.newsletters import NewsletterRow

log = get_logger(__name__)
MAX_TARGET_LENGTH = 200


# Repeated anonymous actions (failed sign-ins before authentication) are folded: one entry
# per target and window with a count, and past this many targets in a window, one entry for
# the rest. A flood of guesses against made-up accounts adds a bounded number of rows.
REPEAT_WINDOW = timedelta(hours=1)
MOST_REPEATED_TARGETS = 100
OTHER_TARGETS = "others"


# An entry to record: action, target, detail.
AuditEntry = tuple[str, str | None, dict[str, Any] | None]

# The actions recorded while one request or command runs (UI-2): what lets the fallback of
# `api.audit_trail` and of the CLI know that the code that acted recorded it already.
_recorded: ContextVar[list[str] | None] = ContextVar("audit_recorded", default=None)


@contextmanager
def recording() -> Iterator[list[str]]:
    """Collect the actions recorded inside the block (by any AuditLog), to tell whether a
    request or a command left an entry."""
    actions: list[str] = []
    token = _recorded.set(actions)
    try:
        yield actions
    finally:
        _recorded.reset(token)


def _noted(action: str) -> None:
    actions = _recorded.get()
    if actions is not None:
        actions.append(action)


def webhook_url_entry(
    endpoint_id: int, url: str, *, before: str | None = None
) -> AuditEntry | None:
    """Where events are now sent: a new endpoint (no `before`), or its URL changed. The detail
    names the host only: a URL may carry a token."""
    if url == before:
        return None
    action = "webhook.created" if before is None else "webhook.url_changed"
    return action, f"webhook:{endpoint_id}", {"host": urlsplit(url).hostname}


def archive_entry(
    newsletter_id: int, slug: str, archive: bool, *, before: bool = False
) -> AuditEntry | None:
    """A newsletter's public archive turned on (publishing its sent issues) or off."""
    if archive == before:
        return None
    return "newsletter.archive", f"newsletter:{newsletter_id}", {"archive": archive, "slug": slug}


def tracking_entry(
    newsletter_id: int, slug: str, tracking: str, *, before: str = "off"
) -> AuditEntry | None:
    """A newsletter's open and click tracking mode changed (ENG-1): what its mail carries."""
    if tracking == before:
        return None
    detail = {"tracking": tracking, "before": before, "slug": slug}
    return "newsletter.tracking", f"newsletter:{newsletter_id}", detail


def newsletter_entries(row: NewsletterRow, before: NewsletterRow | None = None) -> list[AuditEntry]:
    """The audited settings a newsletter's creation (no `before`) or edit changed."""
    entries = (
        archive_entry(row.id, row.slug, row.archive, before=before.archive if before else False),
        tracking_entry(row.id, row.slug, row.tracking, before=before.tracking if before else "off"),
    )
    return [entry for entry in entries if entry is not None]


def export_entry(rows: int, **filters: str | None) -> AuditEntry:
    """A full audience export: how many rows, and the filter (slugs, states, tiers, labels)."""
    used = {name: value for name, value in filters.items() if value is not None}
    return "subscribers.export", None, {"rows": rows, "filter": used}


class AuditLog:
    def __init__(
        self,
        db: Database,
        now: Callable[[], datetime],
        *,
        retention: timedelta = timedelta(days=365),
    ) -> None:
        self._db = db
        self._now = now
        self._retention = retention

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
                conn, now=self._now(), **_entry_fields(actor, action, target, detail)
            )
        _noted(action)
        log.info("audit.recorded", action=action, actor=actor.label, target=target)

    async def record_entry(self, actor: Actor, entry: AuditEntry | None) -> None:
        """Append `entry` (from the functions below), or nothing when it is None."""
        if entry is not None:
            await self.record(actor, *entry)

    async def record_entries(self, actor: Actor, entries: list[AuditEntry]) -> None:
        for entry in entries:
            await self.record(actor, *entry)

    async def record_repeated(
        self,
        actor: Actor,
        action: str,
        target: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Count an action anyone may repeat at will (a failed sign-in) in the entry of the
        same action and target in the current window, or begin that entry."""
        await self._fold(
            actor, action, target, detail, most_targets=MOST_REPEATED_TARGETS, same_actor=False
        )

    async def record_folded(
        self,
        actor: Actor,
        action: str,
        target: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Append one entry, or count it in this actor's entry of the same action and
        target within the hour (a draft saved as its writer types is one entry, counted)."""
        await self._fold(actor, action, target, detail, most_targets=None, same_actor=True)

    async def _fold(
        self,
        actor: Actor,
        action: str,
        target: str | None,
        detail: dict[str, Any] | None,
        *,
        most_targets: int | None,
        same_actor: bool,
    ) -> None:
        now = self._now()
        async with self._db.write() as conn:
            await queries.fold_entry(
                conn,
                now=now,
                since=window_start(now, int(REPEAT_WINDOW.total_seconds())),
                same_actor=same_actor,
                most_targets=most_targets,
                overflow_target=OTHER_TARGETS,
                **_entry_fields(actor, action, target, detail),
            )
        _noted(action)

    async def purge(self) -> int:
        """Delete entries older than the retention (`admin_ui.audit_retention_days`)."""
        async with self._db.write() as conn:
            purged = await queries.delete_before(conn, before=self._now() - self._retention)
        if purged:
            log.info("audit.purged", entries=purged)
        return purged

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


def _entry_fields(
    actor: Actor, action: str, target: str | None, detail: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "actor": actor.label,
        "action": action,
        "target": target[:MAX_TARGET_LENGTH] if target else None,
        "client_ip": actor.client_ip,
        "detail": detail,
    }
