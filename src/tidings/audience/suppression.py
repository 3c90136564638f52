"""Admin use cases for the suppression list (AUD-8): suppress, lift, check, list."""

from __future__ import annotations

from tidings.audience.context import AudienceContext
from tidings.audience.subscriber_events import subscriber_event
from tidings.domain.audience import normalise_email
from tidings.domain.errors import InvalidInput, NotFound
from tidings.storage import subscribers as subscriber_queries
from tidings.storage import suppressions as queries
from tidings.storage.suppressions import SuppressionRow

REASONS = ("hard_bounce", "complaint", "admin", "unsubscribe_all")


class Suppressions:
    def __init__(self, context: AudienceContext) -> None:
        self._ctx = context

    async def suppress(self, email: str, *, reason: str, note: str | None, actor: str) -> bool:
        if reason not in REASONS:
            raise InvalidInput(f"reason must be one of {', '.join(REASONS)}", field="reason")
        address = normalise_email(email)
        email_hash = self._ctx.email_hash(address.key)
        async with self._ctx.db.write() as conn:
            created = await queries.suppress(
                conn, email_hash, reason=reason, note=note, actor=actor, now=self._ctx.now()
            )
            subscriber = await subscriber_queries.get_by_key(conn, address.key)
            if created and subscriber is not None:
                await subscriber_event(
                    self._ctx, conn, "subscriber.suppressed", subscriber, reason=reason
                )
        return created

    async def lift(self, email: str, *, note: str | None, actor: str) -> None:
        address = normalise_email(email)
        async with self._ctx.db.write() as conn:
            lifted = await queries.lift(
                conn, self._ctx.email_hash(address.key), note=note, actor=actor, now=self._ctx.now()
            )
        if not lifted:
            raise NotFound("that address is not suppressed")

    async def is_suppressed(self, email: str) -> bool:
        address = normalise_email(email)
        async with self._ctx.db.read() as conn:
            return await queries.is_suppressed(conn, self._ctx.email_hash(address.key))

    async def list(self, *, after_hash: str | None, limit: int) -> list[SuppressionRow]:
        async with self._ctx.db.read() as conn:
            return await queries.list_suppressions(conn, after_hash=after_hash, limit=limit)
