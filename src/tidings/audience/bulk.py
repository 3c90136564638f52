"""Acting on many subscribers at once (issue 25): label, unlabel, unsubscribe from one
newsletter, delete, or ask the pending ones to confirm. The selection is either ids picked
on a page or everyone matching the list's filter; both are walked by id, a page per write
transaction, and re-checked against the filter as they are read, so a person who left the
filter meanwhile is not acted on."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.audience.context import AudienceContext
from tidings.audience.public import PublicFlows
from tidings.audience.subscriber_events import subscriber_event
from tidings.audience.subscriber_mail import queue_confirmation_email
from tidings.audience.subscribers import Subscribers, validate_labels, validate_tier
from tidings.domain.audit import Actor
from tidings.domain.consent import SubscriptionState, subscription_state
from tidings.domain.errors import InvalidInput, NotFound
from tidings.storage import newsletters as newsletter_queries
from tidings.storage import subscribers as queries
from tidings.storage import subscriptions as subscription_queries
from tidings.storage import suppressions as suppression_queries
from tidings.storage.subscribers import SearchFilter

PAGE = 500
MAX_PICKED = 1000


class BulkAction(StrEnum):
    LABEL = "label"
    UNLABEL = "unlabel"
    UNSUBSCRIBE = "unsubscribe"
    DELETE = "delete"
    CONFIRM = "confirm"  # email the double opt-in link to the pending ones


# What each action needs besides the selection.
NEEDS_LABEL = frozenset({BulkAction.LABEL, BulkAction.UNLABEL})
NEEDS_NEWSLETTER = frozenset({BulkAction.UNSUBSCRIBE, BulkAction.CONFIRM})


@dataclass(frozen=True, slots=True)
class Selection:
    """Who a bulk action is for: the filter of the list, narrowed to `picked` ids when given
    (checkboxes); `picked=None` is "all that match this filter"."""

    newsletter: str | None = None
    state: SubscriptionState | None = None
    tier: str | None = None
    label: str | None = None
    text: str | None = None
    picked: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class BulkRequest:
    action: BulkAction
    selection: Selection
    label: str | None = None
    newsletter: str | None = None  # for unsubscribe and confirm


class AuditRecord(Protocol):
    """How an action is written to the audit log (`AuditLog.record`, handed in by the
    composition root: use cases do not import the audit log)."""

    def __call__(
        self,
        actor: Actor,
        action: str,
        target: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> Awaitable[None]: ...


class BulkActions:
    def __init__(
        self,
        context: AudienceContext,
        flows: PublicFlows,
        subscribers: Subscribers,
        record: AuditRecord,
    ) -> None:
        self._ctx = context
        self._flows = flows
        self._subscribers = subscribers
        self._record = record

    async def apply_by(self, request: BulkRequest, actor: Actor) -> int:
        """A bulk action on subscribers, recorded in the audit log with its count (the API,
        the admin UI and the CLI all come here, so none can forget the record)."""
        changed = await self.apply(request)
        selection = request.selection
        await self._record(
            actor,
            f"subscribers.bulk_{request.action.value}",
            detail={
                "count": changed,
                "label": request.label,
                "newsletter": request.newsletter,
                "picked": None if selection.picked is None else len(selection.picked),
                "filter": {
                    "newsletter": selection.newsletter,
                    "state": selection.state.value if selection.state else None,
                    "tier": selection.tier,
                    "label": selection.label,
                    "text": bool(selection.text),  # the search text may be an address
                },
            },
        )
        return changed

    async def _filter(self, conn: AsyncConnection, selection: Selection) -> SearchFilter:
        newsletter_id = None
        if selection.newsletter:
            found = await newsletter_queries.get_by_slug(conn, selection.newsletter)
            if found is None:
                raise NotFound(f"no newsletter called {selection.newsletter!r}", field="newsletter")
            newsletter_id = found.id
        return SearchFilter(
            newsletter_id=newsletter_id,
            state=selection.state.value if selection.state else None,
            tier=validate_tier(selection.tier) if selection.tier else None,
            label=selection.label.lower() if selection.label else None,
            text=selection.text or None,
        )

    def _checked(self, request: BulkRequest) -> BulkRequest:
        picked = request.selection.picked
        if picked is not None and not 1 <= len(picked) <= MAX_PICKED:
            raise InvalidInput(
                f"pick 1 to {MAX_PICKED} subscribers, or choose all that match", field="ids"
            )
        if request.action in NEEDS_LABEL:
            labels = validate_labels([request.label or ""]) if request.label else []
            if not labels:
                raise InvalidInput("name the label", field="label")
            request = BulkRequest(request.action, request.selection, labels[0], request.newsletter)
        if request.action in NEEDS_NEWSLETTER and not request.newsletter:
            raise InvalidInput("choose the newsletter", field="newsletter")
        return request

    async def count(self, selection: Selection) -> int:
        """How many subscribers the selection holds now: the number a confirmation shows."""
        async with self._ctx.db.read() as conn:
            search = await self._filter(conn, selection)
            if selection.picked is None:
                return await queries.count(conn, search)
            found = await queries.ids_page(
                conn, search, among=selection.picked, after_id=0, limit=MAX_PICKED
            )
            return len(found)

    async def apply(self, request: BulkRequest) -> int:
        """Do it; returns how many subscribers it changed (or, for confirm, emailed)."""
        request = self._checked(request)
        selection = request.selection
        newsletter_id = None
        if request.newsletter:
            async with self._ctx.db.read() as conn:
                newsletter = await newsletter_queries.get_by_slug(conn, request.newsletter)
            if newsletter is None:
                raise NotFound(f"no newsletter called {request.newsletter!r}", field="newsletter")
            newsletter_id = newsletter.id
        changed, after_id = 0, 0
        while True:
            async with self._ctx.db.write() as conn:
                search = await self._filter(conn, selection)
                page = await queries.ids_page(
                    conn, search, among=selection.picked, after_id=after_id, limit=PAGE
                )
                if not page:
                    break
                after_id = page[-1].id
                ids = [row.id for row in page]
                if request.action is BulkAction.DELETE:
                    pass  # each person is erased in a transaction of their own, below
                elif request.action in NEEDS_LABEL:
                    assert request.label is not None
                    if request.action is BulkAction.LABEL:
                        touched = await queries.add_label(
                            conn, ids, request.label, now=self._ctx.now()
                        )
                    else:
                        touched = await queries.remove_label(conn, ids, request.label)
                    touched_ids = set(touched)
                    for row in page:
                        if row.id in touched_ids:
                            await subscriber_event(self._ctx, conn, "subscriber.updated", row)
                    changed += len(touched)
                else:
                    assert newsletter_id is not None
                    changed += await self._per_subscription(
                        conn, request.action, ids, newsletter_id
                    )
            if request.action is BulkAction.DELETE:
                for subscriber_id in ids:
                    await self._subscribers.delete(subscriber_id)
                changed += len(ids)
            if len(page) < PAGE:
                break
        return changed

    async def _per_subscription(
        self, conn: AsyncConnection, action: BulkAction, ids: Sequence[int], newsletter_id: int
    ) -> int:
        done = 0
        for subscriber_id in ids:
            subscription = await subscription_queries.get(conn, subscriber_id, newsletter_id)
            if subscription is None:
                continue
            state = subscription_state(subscription.confirmed_at, subscription.unsubscribed_at)
            if action is BulkAction.UNSUBSCRIBE and state is not SubscriptionState.UNSUBSCRIBED:
                await self._flows.unsubscribe_in(conn, subscription)
                done += 1
            elif action is BulkAction.CONFIRM and state is SubscriptionState.PENDING:
                row = await queries.get(conn, subscriber_id)
                if row is None or await suppression_queries.is_suppressed(conn, row.email_hash):
                    continue
                await queue_confirmation_email(
                    self._ctx, conn, subscriber_id=subscriber_id, newsletter_id=newsletter_id
                )
                done += 1
        return done
