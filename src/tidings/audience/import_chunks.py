"""Writing one chunk of an import (AUD-9): read what is stored for the chunk's addresses,
plan each row against it by the rules in `tidings.audience.importer`, then write the plan in
a handful of multi-row statements in one transaction. Also the report the rows are tallied in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.audience.context import AudienceContext
from tidings.audience.import_header import RowError
from tidings.audience.import_rows import ImportRow, RowResult
from tidings.audience.subscriber_events import subscriber_data
from tidings.domain import consent
from tidings.domain.audience import Source
from tidings.domain.consent import SubscriptionState
from tidings.storage import engagement_people
from tidings.storage import importing as queries
from tidings.storage import subscribers as subscriber_queries
from tidings.storage import suppressions as suppression_queries
from tidings.storage.importing import StoredSubscriber, StoredSubscription
from tidings.storage.newsletters import NewsletterRow
from tidings.storage.subscribers import SubscriberRow

MAX_REPORTED_ERRORS = 1000  # and as many warnings
MAX_REPORTED_RENAMES = 200  # distinct label changes listed
ANALYZE_FIRST_AFTER = 1000  # new subscribers; then at each doubling


@dataclass(frozen=True, slots=True)
class LabelChange:
    """A label the file wrote one way and tidings keeps another ("Press Contact" →
    `press-contact`), and on how many rows."""

    written: str
    kept: str
    rows: int


@dataclass
class ImportReport:
    """What an import did, row by row. `errors` keeps the first MAX_REPORTED_ERRORS;
    `failed_rows` counts them all; likewise `warnings` (values skipped, the row imported)
    and `warned_rows`. `skipped` rows are those the source itself marked as never to be
    imported (a spam filter's catch)."""

    total_rows: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    suppressed: int = 0
    skipped: int = 0
    failed_rows: int = 0
    warned_rows: int = 0
    kept_unsubscribed: int = 0  # asked for pending/confirmed, kept unsubscribed (also counted)
    # What the imported rows' subscriptions are now: mailable (confirmed, not suppressed), or
    # waiting for the person to confirm (`subscribers confirm-pending` asks them).
    mailable: int = 0
    awaiting_confirmation: int = 0
    ignored_columns: list[str] = field(default_factory=list)
    # Columns read into each subscriber's custom fields (AUD-12), as the file names them.
    attribute_columns: list[str] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)
    warnings: list[RowError] = field(default_factory=list)
    label_changes: list[LabelChange] = field(default_factory=list)

    def __post_init__(self) -> None:
        # (as written, as kept) -> rows; not a field, so not in the report's JSON
        self._renames: dict[tuple[str, str], int] = {}

    def add_errors(self, errors: list[RowError]) -> None:
        self.failed_rows += 1
        room = MAX_REPORTED_ERRORS - len(self.errors)
        self.errors.extend(errors[: max(room, 0)])

    def add(self, result: RowResult) -> None:
        """Tally one row's reading: its errors, or its warnings and renamed labels."""
        if result.errors:
            self.add_errors(result.errors)
            return
        self.skipped += result.skipped
        if result.warnings:
            self.warned_rows += 1
            room = MAX_REPORTED_ERRORS - len(self.warnings)
            self.warnings.extend(result.warnings[: max(room, 0)])
        for change in dict.fromkeys(result.renamed_labels):
            if change in self._renames or len(self._renames) < MAX_REPORTED_RENAMES:
                self._renames[change] = self._renames.get(change, 0) + 1

    def finish(self) -> None:
        """List the label changes, the most frequent first."""
        self.label_changes = [
            LabelChange(written, kept, rows)
            for (written, kept), rows in sorted(
                self._renames.items(), key=lambda item: (-item[1], item[0])
            )
        ]


@dataclass
class _Subscriber:
    """One address's state while a chunk is planned: what is stored, plus the rows so far."""

    stored: StoredSubscriber | None
    email: str
    name: str | None
    tier: str
    labels: set[str]
    attributes: dict[str, Any] = field(default_factory=dict)
    name_given: bool = False
    tier_given: bool = False
    fields_changed: bool = False
    added_labels: set[str] = field(default_factory=set)
    newsletter_id: int | None = None  # of the row that created it, for the event
    tracking_consent: bool = False  # on record now (ENG-1)
    tracking_said: bool | None = None  # what the rows assert, if they say


@dataclass
class _SubscriptionPlan:
    """The chunk's subscription writes, decided row by row (the rules in the docstring)."""

    evidence: str
    now: datetime
    # state -> (address key, newsletter id, created at) of the subscriptions to create
    inserts: dict[SubscriptionState, list[tuple[str, int, datetime]]] = field(
        default_factory=lambda: {state: [] for state in SubscriptionState}
    )
    confirm_ids: list[int] = field(default_factory=list)
    unsubscribe_ids: list[int] = field(default_factory=list)

    def add(
        self, row: ImportRow, existing: StoredSubscription | None, suppressed: bool
    ) -> consent.Transition:
        """Plan the row's subscription; `changed` says whether that changes something stored."""
        before = None if existing is None else existing.state
        decision = consent.decide(before, consent.Import(row.status, self.evidence, suppressed))
        assert isinstance(decision, consent.Transition)  # an import is never refused
        if existing is None:
            created_at = row.created_at or self.now
            self.inserts[decision.after].append((row.address.key, row.newsletter_id, created_at))
        elif decision.unsubscribes:
            self.unsubscribe_ids.append(existing.id)
        elif decision.confirms:
            self.confirm_ids.append(existing.id)
        return decision


class ChunkWriter:
    """Writes one chunk per transaction: reads what is stored for the chunk's addresses,
    plans every row against it (the rules in the module docstring), then writes the plan in
    a handful of multi-row statements."""

    def __init__(
        self, context: AudienceContext, newsletters: dict[int, NewsletterRow], *, evidence: str
    ) -> None:
        self._ctx = context
        self._newsletters = newsletters
        self._evidence = evidence
        self._created = 0
        self._statistics_due_at = ANALYZE_FIRST_AFTER

    async def write(self, chunk: list[ImportRow], report: ImportReport) -> None:
        now = self._ctx.now()
        hashes = {row.address.key: self._ctx.email_hash(row.address.key) for row in chunk}
        async with self._ctx.db.write() as conn:
            stored = await queries.subscribers_by_key(conn, hashes.keys())
            suppressed = await queries.suppressed_hashes(conn, set(hashes.values()))
            stored_ids = [row.id for row in stored.values()]
            subscriptions = await queries.subscriptions_of(conn, stored_ids)
            labels = await queries.labels_of(conn, stored_ids)
            people: dict[str, _Subscriber] = {}
            plan = _SubscriptionPlan(self._evidence, now)
            suppressions = await self._suppress(conn, chunk, stored, hashes, now)
            suppressed |= {hashes[row.address.key] for row in chunk if row.suppress}
            for row in chunk:
                key = row.address.key
                if row.suppress:  # the address is suppressed; nothing else of the row is kept
                    report.suppressed += 1
                    continue
                person = people.get(key)
                created = person is None and key not in stored
                if person is None:
                    person = people[key] = _known(stored.get(key), labels, row)
                changed = _apply_fields(person, row)
                existing = None
                if person.stored is not None:
                    existing = subscriptions.get((person.stored.id, row.newsletter_id))
                decision = plan.add(row, existing, hashes[key] in suppressed)
                changed |= decision.changed
                if hashes[key] not in suppressed:
                    report.mailable += decision.after is SubscriptionState.CONFIRMED
                    report.awaiting_confirmation += decision.after is SubscriptionState.PENDING
                if existing is not None and existing.unsubscribed and not row.unsubscribes:
                    report.kept_unsubscribed += 1
                if hashes[key] in suppressed:
                    report.suppressed += 1
                elif created:
                    report.created += 1
                elif changed:
                    report.updated += 1
                else:
                    report.unchanged += 1
            ids, created_keys = await self._write_subscribers(conn, people, hashes, now)
            withdrawn = [ids[k] for k, p in people.items() if p.tracking_said is False]
            await queries.set_tracking_consent(
                conn,
                given=[ids[k] for k, p in people.items() if p.tracking_said is True],
                withdrawn=withdrawn,
                now=now,
            )
            await engagement_people.forget(conn, withdrawn)  # recorded under the consent
            await queries.add_labels(
                conn, {ids[key]: person.added_labels for key, person in people.items()}, now=now
            )
            new_subscriptions: dict[tuple[int, int], SubscriptionState] = {}
            for state, inserts in plan.inserts.items():
                landed = await queries.insert_subscriptions(
                    conn,
                    [
                        {"subscriber_id": ids[key], "newsletter_id": newsletter, "created_at": at}
                        for key, newsletter, at in inserts
                    ],
                    state=state.value,
                    source=Source.IMPORT.value,
                    evidence=self._evidence,
                    now=now,
                )
                new_subscriptions.update(dict.fromkeys(landed, state))
            changes = _ConsentChanges(
                created_subscribers=created_keys,
                created=new_subscriptions,
                confirmed=await queries.confirm_subscriptions(
                    conn, plan.confirm_ids, evidence=self._evidence, now=now
                ),
                unsubscribed=await queries.unsubscribe_subscriptions(
                    conn, plan.unsubscribe_ids, now=now
                ),
            )
            # In the chunk's transaction, like every other change they report (PRI-6).
            await self._ctx.webhooks.publish_many(
                conn,
                self._events(people, ids, hashes, changes, now) + suppressions,
                from_import=True,
            )
        if self._created >= self._statistics_due_at:
            # Each doubling of what this import added: a handful of times per import.
            self._statistics_due_at *= 2
            async with self._ctx.db.write() as conn:
                await queries.refresh_statistics(conn)

    async def _suppress(
        self,
        conn: AsyncConnection,
        chunk: list[ImportRow],
        stored: dict[str, StoredSubscriber],
        hashes: dict[str, str],
        now: datetime,
    ) -> list[tuple[str, dict[str, Any]]]:
        """Suppress the addresses the source found undeliverable, complaining or blocked
        (AUD-8), logged with the import as the actor; a `subscriber.suppressed` event for
        each one newly suppressed that is a subscriber here."""
        events: list[tuple[str, dict[str, Any]]] = []
        for row in chunk:
            if not row.suppress:
                continue
            key = row.address.key
            created = await suppression_queries.suppress(
                conn,
                hashes[key],
                reason=row.suppress,
                note=f"imported: line {row.line} of the file",
                actor=self._evidence,
                now=now,
            )
            if created and key in stored:
                subscriber = await subscriber_queries.get_by_key(conn, key)
                if subscriber is not None:
                    events.append(
                        (
                            "subscriber.suppressed",
                            subscriber_data(subscriber, source="import", reason=row.suppress),
                        )
                    )
        return events

    async def _write_subscribers(
        self,
        conn: AsyncConnection,
        people: dict[str, _Subscriber],
        hashes: dict[str, str],
        now: datetime,
    ) -> tuple[dict[str, int], set[str]]:
        """Upsert new and changed subscribers; every key's id, and the keys it created."""
        ids = {key: person.stored.id for key, person in people.items() if person.stored}
        by_tier_given: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
        for key, person in people.items():
            if person.stored is None or person.fields_changed:
                by_tier_given[person.tier_given].append(
                    {
                        "email": person.email,
                        "email_key": key,
                        "email_hash": hashes[key],
                        "name": person.name if person.name_given else None,
                        "tier": person.tier,
                        "attributes": person.attributes,
                    }
                )
        created: set[str] = set()
        for update_tier, rows in by_tier_given.items():
            written, new = await queries.upsert_subscribers(
                conn, rows, update_tier=update_tier, now=now
            )
            ids.update(written)
            # Only a subscriber planned as new: the clock may repeat an earlier `now`.
            created |= {key for key in new if people[key].stored is None}
        self._created += len(created)
        return ids, created

    def _events(
        self,
        people: dict[str, _Subscriber],
        ids: dict[str, int],
        hashes: dict[str, str],
        changes: _ConsentChanges,
        now: datetime,
    ) -> list[tuple[str, dict[str, Any]]]:
        """The chunk's webhook events, for what it changed and nothing else: one
        `subscriber.created` per subscriber it created, carrying the newsletter and state of
        the subscription that subscriber's first row created (a confirmed import is one event,
        not two); `subscriber.confirmed` and `subscriber.unsubscribed` for the consent it
        changed otherwise. A row the database skipped (ON CONFLICT DO NOTHING) changed
        nothing and publishes nothing."""
        key_of = {subscriber_id: key for key, subscriber_id in ids.items()}

        def data(subscriber_id: int, newsletter_id: int | None, **extra: Any) -> dict[str, Any]:
            key = key_of[subscriber_id]
            person = people[key]
            row = SubscriberRow(
                id=subscriber_id,
                email=person.email,
                email_key=key,
                email_hash=hashes[key],
                name=person.name,
                tier=person.tier,
                attributes=person.attributes,
                created_at=now,
                updated_at=now,
            )
            newsletter = self._newsletters.get(newsletter_id or 0)
            return subscriber_data(row, newsletter, source="import", **extra)

        events: list[tuple[str, dict[str, Any]]] = []
        announced: set[tuple[int, int]] = set()
        for key in changes.created_subscribers:
            first = (ids[key], people[key].newsletter_id or 0)
            state = changes.created.get(first)
            extra = {} if state is None else {"state": state.value}
            announced.add(first)
            events.append(("subscriber.created", data(first[0], first[1], **extra)))
        for pair, state in changes.created.items():
            if state is SubscriptionState.CONFIRMED and pair not in announced:
                events.append(("subscriber.confirmed", data(*pair)))
        events += [("subscriber.confirmed", data(*pair)) for pair in changes.confirmed]
        events += [("subscriber.unsubscribed", data(*pair)) for pair in changes.unsubscribed]
        return events


@dataclass(frozen=True, slots=True)
class _ConsentChanges:
    """What a chunk's writes changed, as the database reported it."""

    created_subscribers: set[str]  # address keys
    created: dict[tuple[int, int], SubscriptionState]  # (subscriber, newsletter) -> state
    confirmed: list[tuple[int, int]]  # pending subscriptions it confirmed
    unsubscribed: list[tuple[int, int]]


def _known(
    stored: StoredSubscriber | None, labels: dict[int, set[str]], row: ImportRow
) -> _Subscriber:
    if stored is None:
        return _Subscriber(
            None, row.address.email, None, "free", set(), newsletter_id=row.newsletter_id
        )
    return _Subscriber(
        stored,
        stored.email,
        stored.name,
        stored.tier,
        set(labels.get(stored.id, ())),
        dict(stored.attributes),
        tracking_consent=stored.tracking_consent,
    )


def _apply_fields(person: _Subscriber, row: ImportRow) -> bool:
    """Fold the row's subscriber fields in; True when it changes something stored."""
    changed = False
    if row.name is not None:
        person.name_given = True
        if row.name != person.name:
            person.name, person.fields_changed, changed = row.name, True, True
    if row.tier is not None:
        person.tier_given = True
        if row.tier != person.tier:
            person.tier, person.fields_changed, changed = row.tier, True, True
    # Custom fields merge: a field the row gives replaces the stored one, others stay.
    merged = {**person.attributes, **row.attributes}
    if merged != person.attributes:
        person.attributes, person.fields_changed, changed = merged, True, True
    if row.tracking_consent is not None:
        person.tracking_said = row.tracking_consent
        changed |= row.tracking_consent != person.tracking_consent
    new_labels = set(row.labels) - person.labels
    if new_labels:
        person.labels |= new_labels
        person.added_labels |= new_labels
        changed = True
    return changed
