"""Admin use cases for subscribers: search, get, create, update, subscriptions, privacy
export and delete (API-2, AUD-10)."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any

import structlog

from tidings.audience.consent import ConsentRecorder
from tidings.audience.context import AudienceContext
from tidings.audience.public import PublicFlows
from tidings.audience.subscriber_events import subscriber_event
from tidings.audience.tracking_consent import consent_of, record_tracking_consent
from tidings.domain import consent
from tidings.domain.audience import Source, Tier, normalise_email, validate_name
from tidings.domain.consent import SubscriptionState, subscription_state
from tidings.domain.errors import Conflict, InvalidInput, NotFound
from tidings.domain.tracking_consent import ConsentSource
from tidings.storage import engagement_people, privacy
from tidings.storage import feedback as feedback_queries
from tidings.storage import newsletters as newsletter_queries
from tidings.storage import subscribers as queries
from tidings.storage import subscriptions as subscription_queries
from tidings.storage import suppressions as suppression_queries
from tidings.storage.subscribers import SearchFilter, SubscriberRow

log = structlog.get_logger("tidings.audience")
MAX_LABELS = 50
LABEL = re.compile(r"[a-z0-9_-]{1,64}")
MAX_ATTRIBUTES_BYTES = 16_384


class SubscriberExists(Conflict):
    """Adding a subscriber whose address is already one: the caller is pointed at the person,
    to put them on a newsletter instead (`Memberships.add`)."""

    def __init__(self, subscriber_id: int) -> None:
        super().__init__(
            f"a subscriber with that address exists (id {subscriber_id}): put them on a "
            f"newsletter with POST /api/admin/subscribers/{subscriber_id}/subscriptions",
            field="email",
        )
        self.subscriber_id = subscriber_id

    def problem_fields(self) -> dict[str, Any]:
        return {"subscriber_id": self.subscriber_id}


@dataclass(frozen=True, slots=True)
class SubscriptionView:
    newsletter: str
    newsletter_name: str
    state: SubscriptionState
    source: str
    created_at: Any
    confirmed_at: Any
    consent_evidence: str | None
    unsubscribed_at: Any
    unsubscribe_count: int
    last_unsubscribed_at: Any


@dataclass(frozen=True, slots=True)
class SubscriberView:
    subscriber: SubscriberRow
    labels: list[str]
    subscriptions: list[SubscriptionView]
    suppressed: bool


def validate_labels(labels: list[str]) -> list[str]:
    cleaned = list(dict.fromkeys(label.strip().lower() for label in labels))
    if len(cleaned) > MAX_LABELS:
        raise InvalidInput(f"at most {MAX_LABELS} labels", field="labels")
    for label in cleaned:
        # The same alphabet as campaign filters (`label:NAME`), so every label is targetable.
        if not LABEL.fullmatch(label):
            raise InvalidInput("labels are 1-64 of a-z, 0-9, - or _", field="labels")
    return cleaned


def validate_tier(tier: str) -> str:
    try:
        return Tier(tier).value
    except ValueError:
        raise InvalidInput("tier must be free, paid or comped", field="tier") from None


class Subscribers:
    def __init__(self, context: AudienceContext, flows: PublicFlows) -> None:
        self._ctx = context
        self._flows = flows
        self._consent = ConsentRecorder(context)

    async def _newsletter_id(self, conn: Any, slug: str | None) -> int | None:
        if slug is None:
            return None
        newsletter = await newsletter_queries.get_by_slug(conn, slug)
        if newsletter is None:
            raise NotFound(f"no newsletter called {slug!r}", field="newsletter")
        return newsletter.id

    async def search(
        self,
        *,
        newsletter: str | None = None,
        state: SubscriptionState | None = None,
        tier: str | None = None,
        label: str | None = None,
        text: str | None = None,
        after_id: int | None = None,
        limit: int = 100,
    ) -> list[SubscriberView]:
        async with self._ctx.db.read() as conn:
            search = SearchFilter(
                newsletter_id=await self._newsletter_id(conn, newsletter),
                state=state.value if state else None,
                tier=validate_tier(tier) if tier else None,
                label=label.lower() if label else None,
                text=text,
            )
            rows = await queries.search(conn, search, after_id=after_id, limit=limit)
            return [await self._view(conn, row) for row in rows]

    async def _view(self, conn: Any, row: SubscriberRow) -> SubscriberView:
        labels = (await queries.labels_of(conn, [row.id]))[row.id]
        subscriptions = [
            SubscriptionView(
                newsletter=slug,
                newsletter_name=name,
                state=subscription_state(s.confirmed_at, s.unsubscribed_at),
                source=s.source,
                created_at=s.created_at,
                confirmed_at=s.confirmed_at,
                consent_evidence=s.consent_evidence,
                unsubscribed_at=s.unsubscribed_at,
                unsubscribe_count=s.unsubscribe_count,
                last_unsubscribed_at=s.last_unsubscribed_at,
            )
            for s, slug, name in await subscription_queries.of_subscriber(conn, row.id)
        ]
        suppressed = await suppression_queries.is_suppressed(conn, row.email_hash)
        return SubscriberView(row, labels, subscriptions, suppressed)

    async def get(self, subscriber_id: int) -> SubscriberView:
        async with self._ctx.db.read() as conn:
            row = await queries.get(conn, subscriber_id)
            if row is None:
                raise NotFound(f"no subscriber with id {subscriber_id}")
            return await self._view(conn, row)

    async def create(
        self,
        *,
        email: str,
        name: str | None,
        tier: str,
        labels: list[str],
        attributes: dict[str, Any],
        subscribe_to: list[tuple[str, bool]],
        actor: str,
        tracking_consent: bool = False,
    ) -> SubscriberView:
        """Create a subscriber. `(newsletter, True)` records consent asserted by the admin
        (`admin:<key id>` as evidence); `(newsletter, False)` sends a confirmation email.
        `tracking_consent`: the caller asserts the person agreed to per-person tracking
        (source `api`)."""
        address = normalise_email(email)
        values = {
            "name": validate_name(name),
            "tier": validate_tier(tier),
            "attributes": _checked_attributes(attributes),
        }
        labels = validate_labels(labels)
        now = self._ctx.now()
        async with self._ctx.db.write() as conn:
            row, created = await queries.insert_if_absent(
                conn,
                email=address.email,
                email_key=address.key,
                email_hash=self._ctx.email_hash(address.key),
                created_at=now,
                updated_at=now,
                **values,
            )
            if not created:
                raise SubscriberExists(row.id)
            if tracking_consent:
                row = await record_tracking_consent(
                    conn, row, True, source=ConsentSource.API, now=now
                )
            await queries.set_labels(conn, row.id, labels, now=now)
            await subscriber_event(self._ctx, conn, "subscriber.created", row, source="admin")
            for slug, asserted in subscribe_to:
                await self._subscribe(conn, row, slug, asserted=asserted, actor=actor)
            return await self._view(conn, row)

    async def _subscribe(
        self, conn: Any, row: SubscriberRow, slug: str, *, asserted: bool, actor: str
    ) -> None:
        newsletter = await newsletter_queries.get_by_slug(conn, slug)
        if newsletter is None:
            raise NotFound(f"no newsletter called {slug!r}", field="subscriptions")
        now = self._ctx.now()
        if await suppression_queries.is_suppressed(conn, row.email_hash):
            raise Conflict(
                "the address is suppressed; lift the suppression first", field="subscriptions"
            )
        if not asserted:  # the admin asked, not the person: always double opt-in
            await self._consent.request(
                conn, row, newsletter, source=Source.ADMIN, now=now, double_opt_in=True
            )
            return
        subscription, before = await self._consent.subscription(
            conn, row.id, newsletter.id, source=Source.ADMIN, now=now
        )
        decision = consent.decide(before, consent.AssertConsent(actor))
        if isinstance(decision, consent.Refusal):
            # The person left themselves; an admin assertion must not silently undo that.
            raise Conflict(
                f"the subscriber unsubscribed from {slug!r}; send a confirmation instead "
                "(confirmed: false)",
                field="subscriptions",
            )
        await self._consent.record(
            conn, subscription, decision, now=now, owners=(row, newsletter), asserted_by=actor
        )

    async def unsubscribe(self, subscriber_id: int, slug: str) -> SubscriberView:
        async with self._ctx.db.write() as conn:
            row = await queries.get(conn, subscriber_id)
            newsletter_id = await self._newsletter_id(conn, slug)
            if row is None or newsletter_id is None:
                raise NotFound(f"no subscriber with id {subscriber_id}")
            subscription = await subscription_queries.get(conn, row.id, newsletter_id)
            if subscription is None:
                raise NotFound("the subscriber is not subscribed to that newsletter")
            await self._flows.unsubscribe_in(conn, subscription)
            return await self._view(conn, row)

    async def update(
        self,
        subscriber_id: int,
        *,
        name: str | None = None,
        tier: str | None = None,
        labels: list[str] | None = None,
        attributes: dict[str, Any] | None = None,
        tracking_consent: bool | None = None,
    ) -> SubscriberView:
        """Change what is given; `tracking_consent` True asserts consent to per-person
        tracking (source `api`), False withdraws it."""
        changes: dict[str, Any] = {}
        if name is not None:
            changes["name"] = validate_name(name)
        if tier is not None:
            changes["tier"] = validate_tier(tier)
        if attributes is not None:
            changes["attributes"] = _checked_attributes(attributes)
        cleaned_labels = validate_labels(labels) if labels is not None else None
        now = self._ctx.now()
        async with self._ctx.db.write() as conn:
            row = await queries.update_subscriber(conn, subscriber_id, **changes, updated_at=now)
            if row is None:
                raise NotFound(f"no subscriber with id {subscriber_id}")
            if cleaned_labels is not None:
                await queries.set_labels(conn, row.id, cleaned_labels, now=now)
            if tracking_consent is not None:
                row = await record_tracking_consent(
                    conn, row, tracking_consent, source=ConsentSource.API, now=now
                )
            await subscriber_event(self._ctx, conn, "subscriber.updated", row)
            return await self._view(conn, row)

    async def find(self, email: str) -> SubscriberView:
        """The subscriber with this address (any spelling of it)."""
        address = normalise_email(email)
        async with self._ctx.db.read() as conn:
            row = await queries.get_by_key(conn, address.key)
            if row is None:
                raise NotFound("no subscriber with that address", field="email")
            return await self._view(conn, row)

    async def history(self, subscriber_id: int) -> list[dict[str, Any]]:
        """What providers and mailboxes reported about the person and what was decided
        (AUD-13), then every suppression and lift of the address, oldest first."""
        async with self._ctx.db.read() as conn:
            row = await queries.get(conn, subscriber_id)
            if row is None:
                raise NotFound(f"no subscriber with id {subscriber_id}")
            return await _history(conn, row.email_hash)

    async def export(self, subscriber_id: int) -> dict[str, Any]:
        """Everything stored about one person (AUD-10), as JSON-ready data: the audience
        rows, jobs to or about them (mail, subscribe requests), mail captured for them and
        webhook deliveries about them."""
        async with self._ctx.db.read() as conn:
            row = await queries.get(conn, subscriber_id)
            if row is None:
                raise NotFound(f"no subscriber with id {subscriber_id}")
            view = await self._view(conn, row)
            traces = await privacy.traces_of(conn, subscriber_id=row.id, email_key=row.email_key)
            history = await _history(conn, row.email_hash)
            hits = await engagement_people.hits_of(conn, row.id)
        return {
            "subscriber": {
                "id": row.id,
                "email": row.email,
                "name": row.name,
                "tier": row.tier,
                "attributes": row.attributes,
                "labels": view.labels,
                "created_at": row.created_at.isoformat(),
                "updated_at": row.updated_at.isoformat(),
            },
            # Per-person tracking (ENG-1, ENG-6): when and how consent was given, and the
            # person's own hits (kept only with that consent, for tracking.retention_days).
            "tracking_consent": _json_ready(asdict(consent_of(row))),
            "engagement_hits": [_json_ready(asdict(hit)) for hit in hits],
            "subscriptions": [_json_ready(asdict(s)) for s in view.subscriptions],
            "suppressed": view.suppressed,
            "jobs": [_json_ready(job) for job in traces["jobs"]],
            "captured_mail": [_captured(message) for message in traces["captured"]],
            "webhook_deliveries": [_json_ready(d) for d in traces["webhook_deliveries"]],
            "history": history,
        }

    async def delete(self, subscriber_id: int) -> None:
        """Remove the person's data (AUD-10). A suppression of the address stays: it is a
        keyed hash, not personal data in clear, and it must keep blocking re-imports."""
        async with self._ctx.db.write() as conn:
            row = await queries.get(conn, subscriber_id)
            if row is None:
                raise NotFound(f"no subscriber with id {subscriber_id}")
            # Mail to and about them, queued or captured, and webhook payloads about them
            # go too (AUD-10).
            await privacy.erase_traces(conn, subscriber_id=row.id, email_key=row.email_key)
            # What providers reported about them, diagnostics included (AUD-13).
            await feedback_queries.erase_address(conn, row.email_hash)
            await self._ctx.webhooks.publish(
                conn, "subscriber.deleted", {"subscriber_id": subscriber_id}
            )
            await queries.delete_subscriber(conn, subscriber_id)
        log.info("subscriber.deleted", subscriber_id=subscriber_id)


async def _history(conn: Any, email_hash: str) -> list[dict[str, Any]]:
    heard = [
        _json_ready({"kind": "event", **{k: v for k, v in entry.items() if k != "email_hash"}})
        for entry in await feedback_queries.history_of(conn, email_hash)
    ]
    suppressions = [
        _json_ready(
            {"kind": "suppression", **{k: v for k, v in entry.items() if k != "email_hash"}}
        )
        for entry in await suppression_queries.history(conn, email_hash)
    ]
    return sorted([*heard, *suppressions], key=lambda entry: (entry["created_at"], entry["kind"]))


def _json_ready(values: dict[str, Any]) -> dict[str, Any]:
    return {
        key: (value.isoformat() if hasattr(value, "isoformat") else value)
        for key, value in values.items()
    }


def _captured(message: dict[str, Any]) -> dict[str, Any]:
    """A captured message with its raw bytes as text (mail is 7-bit or UTF-8 in practice)."""
    raw: bytes = message["raw"]
    return _json_ready({**message, "raw": raw.decode("utf-8", errors="replace")})


def _checked_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    if len(json.dumps(attributes)) > MAX_ATTRIBUTES_BYTES:
        raise InvalidInput(
            f"attributes must be under {MAX_ATTRIBUTES_BYTES} bytes of JSON", field="attributes"
        )
    return attributes
