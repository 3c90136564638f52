"""CSV import and export (AUD-9): idempotent upsert, per-row errors, consent rules, round trip."""

import csv
import io
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import func, select, update

from tests.support import rows
from tests.support.audience import SECRET, audience_context
from tests.support.clock import Clock
from tidings.audience.context import AudienceContext
from tidings.audience.importer import Importer, ImportReport
from tidings.domain import tokens
from tidings.domain.errors import InvalidInput
from tidings.storage import subscriptions as subscription_queries
from tidings.storage import suppressions as suppression_queries
from tidings.storage.consent import mailable
from tidings.storage.database import Database
from tidings.storage.tables import (
    confirmation_tokens,
    jobs,
    subscriber_labels,
    subscribers,
    subscriptions,
    webhook_deliveries,
)

HEADER = "email,name,tier,labels,newsletter,status,created_at,attributes"


@pytest.fixture
def clock() -> Clock:
    return Clock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC))


@pytest.fixture
async def context(db: Database, clock: Clock) -> AudienceContext:
    async with db.write() as conn:
        for slug in ("weekly", "offers"):
            await rows.newsletter(
                conn, slug=slug, name=slug.title(), sender_address="news@example.org"
            )
    return audience_context(db, clock)


def _csv(*rows: str, header: str = HEADER) -> list[str]:
    return io.StringIO("\n".join([header, *rows]) + "\n", newline="").readlines()


async def _import(context: AudienceContext, lines: list[str], **options: Any) -> ImportReport:
    return await Importer(context).import_csv(
        lines, newsletter_slug="weekly", actor="ops", **options
    )


async def _subscriptions(db: Database) -> list[dict[str, Any]]:
    async with db.read() as conn:
        query = (
            select(subscribers.c.email_key, subscribers.c.name, subscribers.c.tier, subscriptions)
            .join(subscribers, subscribers.c.id == subscriptions.c.subscriber_id)
            .order_by(subscriptions.c.id)
        )
        return [dict(row._mapping) for row in await conn.execute(query)]


async def _one(db: Database, email_key: str) -> dict[str, Any]:
    (found,) = [row for row in await _subscriptions(db) if row["email_key"] == email_key]
    return found


async def _count(db: Database, table: Any) -> int:
    async with db.read() as conn:
        return int((await conn.execute(select(func.count()).select_from(table))).scalar_one())


def _counts(report: ImportReport) -> tuple[int, int, int, int, int]:
    return (report.created, report.updated, report.unchanged, report.suppressed, report.failed_rows)


MIXED = _csv(
    "ada@example.org,Ada Lovelace,paid,beta;vip,,confirmed,2024-05-01T10:00:00Z",
    "bob@example.org,Bob,,,,pending,",
    "cy@example.org,,comped,beta|events,offers,unsubscribed,2023-01-02",
    "ada@example.org,,,events,offers,pending,",
    "dee@example.org,Dee,free,,,,",
)


async def test_importing_the_same_file_twice_changes_nothing_the_second_time(
    context: AudienceContext, db: Database, clock: Clock
) -> None:
    """An admin re-runs an import after a timeout; it must be safe to press the button twice."""
    first = await _import(context, MIXED, chunk_size=2)
    before = await _subscriptions(db)
    clock.advance()  # a rewrite would show in updated_at
    second = await _import(context, MIXED, chunk_size=2)
    assert _counts(first) == (4, 1, 0, 0, 0)  # ada's second newsletter updates her
    assert _counts(second) == (0, 0, 5, 0, 0)
    assert await _subscriptions(db) == before
    assert await _count(db, subscriber_labels) == 5


async def test_blank_cells_never_clear_stored_data(context: AudienceContext, db: Database) -> None:
    """A partial file (only emails and labels) must not wipe names and tiers already stored."""
    await _import(context, _csv("ada@example.org,Ada,paid,beta,,,"))
    report = await _import(context, _csv("ada@example.org,,,vip,,,"))
    ada = await _one(db, "ada@example.org")
    assert (ada["name"], ada["tier"]) == ("Ada", "paid")
    assert _counts(report) == (0, 1, 0, 0, 0)
    assert await _count(db, subscriber_labels) == 2  # beta kept, vip added


async def test_row_errors_name_line_and_field_while_valid_rows_import(
    context: AudienceContext, db: Database
) -> None:
    """One bad row in 100,000 must not sink the file, and the admin must find it by line,
    column and value; a bad value in a good row loses that value only."""
    lines = _csv(
        "ok1@example.org,,,,,,",  # line 2
        "not-an-address,,,,,,",  # 3
        '"ok2@example.org","Two\nLines",,,,,',  # 4-5: a quoted line break, a bad name
        "bad-tier@example.org,,gold,,,,",  # 6
        "bad-label@example.org,,,no spaces,,,",  # 7
        "bad-status@example.org,,,,,bouncing,",  # 8
        "bad-date@example.org,,,,,,yesterday",  # 9
        "lost@example.org,,,,nowhere,,",  # 10
        "OK1@Example.org,,,,,,",  # 11: the same address as line 2, same newsletter
        "future@example.org,,,,,,2999-01-01",  # 12
        "extra@example.org,,,,,,,,surplus",  # 13
        ",,,,,,",  # 14: blank rows are skipped
        "ok3@example.org,,,,,,",  # 15
    )
    report = await _import(context, lines, chunk_size=3)
    assert [(e.line, e.column or e.field, e.value) for e in report.errors] == [
        (3, "email", "not-an-address"),
        (8, "status", "bouncing"),
        (10, "newsletter", "nowhere"),
        (11, "email", "OK1@Example.org"),
        (13, "row", None),
    ]
    assert "repeats line 2" in report.errors[3].message
    assert not any("example.org" in error.message for error in report.errors), "no addresses"
    # A value that cannot be used is skipped, never the row; a label is made to fit.
    assert [(w.line, w.column, w.value) for w in report.warnings] == [
        (4, "name", "Two\nLines"),
        (6, "tier", "gold"),
        (9, "created_at", "yesterday"),
        (12, "created_at", "2999-01-01"),
    ]
    assert [(c.written, c.kept, c.rows) for c in report.label_changes] == [
        ("no spaces", "no-spaces", 1)
    ]
    assert (report.total_rows, report.created, report.failed_rows, report.warned_rows) == (
        12,
        7,
        5,
        4,
    )
    assert [row["email_key"] for row in await _subscriptions(db)] == [
        "ok1@example.org",
        "ok2@example.org",
        "bad-tier@example.org",
        "bad-label@example.org",
        "bad-date@example.org",
        "future@example.org",
        "ok3@example.org",
    ]


async def test_confirmed_import_records_source_import_and_consent_evidence(
    context: AudienceContext, db: Database, clock: Clock
) -> None:
    """Importing as confirmed is the admin asserting consent; an audit must see who and how."""
    await _import(context, _csv("ada@example.org,,,,,confirmed,2024-05-01T10:00:00+02:00"))
    ada = await _one(db, "ada@example.org")
    assert ada["source"] == "import"
    assert ada["consent_evidence"] == "import:ops"
    assert ada["confirmed_at"] == clock.now
    assert ada["created_at"] == datetime(2024, 5, 1, 8, 0, tzinfo=UTC)


async def test_pending_import_sends_no_confirmation_email(
    context: AudienceContext, db: Database
) -> None:
    """Mailing thousands of people from an import is a separate, explicit action."""
    await _import(context, _csv("bob@example.org,,,,,pending,", "cy@example.org,,,,,,"))
    rows = await _subscriptions(db)
    assert [row["confirmed_at"] for row in rows] == [None] * 2
    assert await _count(db, confirmation_tokens) == 0
    assert await _count(db, jobs) == 0


async def test_unsubscribed_import_carries_its_history(
    context: AudienceContext, db: Database, clock: Clock
) -> None:
    """The CHECK forbids "unsubscribed now, never unsubscribed"; the import must satisfy it."""
    await _import(context, _csv("cy@example.org,,,,,unsubscribed,"))
    cy = await _one(db, "cy@example.org")
    assert (cy["unsubscribed_at"], cy["unsubscribe_count"], cy["last_unsubscribed_at"]) == (
        clock.now,
        1,
        clock.now,
    )
    assert cy["confirmed_at"] is None


@pytest.mark.parametrize("first_status", ["pending", "confirmed"])
async def test_reimport_does_not_revive_an_unsubscribed_subscription(
    context: AudienceContext, db: Database, first_status: str
) -> None:
    """An old export re-imported must never override a person's own unsubscribe."""
    await _import(context, _csv(f"ada@example.org,,,,,{first_status},"))
    ada = await _one(db, "ada@example.org")
    async with db.write() as conn:
        await subscription_queries.mark_unsubscribed(conn, ada["id"], now=context.now())
    report = await _import(context, _csv("ada@example.org,,,,,confirmed,"))
    after = await _one(db, "ada@example.org")
    assert after["unsubscribed_at"] is not None
    assert after["unsubscribe_count"] == 1
    assert (report.unchanged, report.kept_unsubscribed) == (1, 1)


async def test_unsubscribed_in_the_file_unsubscribes_a_confirmed_subscription(
    context: AudienceContext, db: Database
) -> None:
    """Moving a list from another platform carries its unsubscribes; honouring one is safe."""
    await _import(context, _csv("ada@example.org,,,,,confirmed,"))
    report = await _import(context, _csv("ada@example.org,,,,,unsubscribed,"))
    ada = await _one(db, "ada@example.org")
    assert (ada["unsubscribe_count"], report.updated) == (1, 1)
    assert ada["unsubscribed_at"] is not None


async def test_suppressed_address_is_stored_but_never_mailable(
    context: AudienceContext, db: Database
) -> None:
    """A bounced or complaining address re-imported must stay blocked (AUD-8)."""
    async with db.write() as conn:
        await suppression_queries.suppress(
            conn,
            tokens.keyed_email_hash(SECRET, "eve@example.org"),
            reason="complaint",
            note=None,
            actor="test",
            now=context.now(),
        )
    lines = _csv("Eve@Example.org,Eve,,,,confirmed,", "ok@example.org,,,,,confirmed,")
    first = await _import(context, lines)
    second = await _import(context, lines)
    eve = await _one(db, "eve@example.org")
    assert eve["confirmed_at"] is None
    assert (first.suppressed, first.created, second.suppressed, second.unchanged) == (1, 1, 1, 1)
    async with db.read() as conn:
        query = (
            select(subscribers.c.email_key)
            .join(subscriptions, subscriptions.c.subscriber_id == subscribers.c.id)
            .where(mailable())
        )
        assert list((await conn.execute(query)).scalars()) == ["ok@example.org"]


async def test_new_subscribers_are_published_to_listening_endpoints(
    context: AudienceContext, db: Database
) -> None:
    """Integrations (a CRM, say) learn of imported people like any others, in the same commit."""
    await context.webhooks.create_endpoint("https://hooks.example.org/in", ["subscriber.created"])
    await _import(context, MIXED, chunk_size=2)
    assert await _count(db, webhook_deliveries) == 4  # one per new address, not per row
    await _import(context, MIXED, chunk_size=2)
    assert await _count(db, webhook_deliveries) == 4


async def test_export_round_trips_what_was_imported(context: AudienceContext, db: Database) -> None:
    """Moving between sites, or editing in a spreadsheet, must not lose or change anyone."""
    lines = [
        *MIXED,
        "'=eve@example.org,=HYPERLINK(1),,,,confirmed,\n",  # formula cells come back as text
    ]
    await _import(context, lines)
    exported = io.StringIO(newline="")
    written = await Importer(context).export_csv(exported)
    rows = list(csv.DictReader(io.StringIO(exported.getvalue(), newline="")))
    assert written == len(rows) == 6
    ada = sorted(
        (row["newsletter"], row["status"], row["labels"], row["created_at"])
        for row in rows
        if row["email"] == "ada@example.org"
    )
    assert ada == [
        ("offers", "pending", "beta;events;vip", "2026-03-01T12:00:00+00:00"),
        ("weekly", "confirmed", "beta;events;vip", "2024-05-01T10:00:00+00:00"),
    ]
    eve = next(row for row in rows if row["email"].endswith("eve@example.org"))
    assert (eve["email"], eve["name"]) == ("'=eve@example.org", "'=HYPERLINK(1)")
    assert {row["attributes"] for row in rows} == {""}
    fields = {"city": "Zürich", "kids": 2}
    async with db.write() as conn:
        await conn.execute(
            update(subscribers)
            .where(subscribers.c.email == "ada@example.org")
            .values(attributes=fields)
        )
    exported = io.StringIO(newline="")
    await Importer(context).export_csv(exported)
    rows = list(csv.DictReader(io.StringIO(exported.getvalue(), newline="")))
    ada_rows = [row for row in rows if row["email"] == "ada@example.org"]
    assert [json.loads(row["attributes"]) for row in ada_rows] == [fields, fields]
    before = await _subscriptions(db)
    again = await _import(context, io.StringIO(exported.getvalue(), newline="").readlines())
    assert (again.unchanged, again.failed_rows) == (6, 0)
    assert await _subscriptions(db) == before


async def test_export_filters_by_newsletter_state_tier_and_label(
    context: AudienceContext,
) -> None:
    """AUD-9's "export any filtered audience": filters select subscriptions, not whole people."""
    await _import(context, MIXED)
    exporter = Importer(context)

    async def emails(**filters: Any) -> list[tuple[str, str]]:
        out = io.StringIO(newline="")
        await exporter.export_csv(out, **filters)
        return sorted(
            (row["email"], row["newsletter"])
            for row in csv.DictReader(io.StringIO(out.getvalue(), newline=""))
        )

    assert await emails(newsletter="offers") == [
        ("ada@example.org", "offers"),
        ("cy@example.org", "offers"),
    ]
    assert await emails(state="confirmed") == [("ada@example.org", "weekly")]
    assert await emails(tier="comped") == [("cy@example.org", "offers")]
    assert await emails(label="events", newsletter="weekly") == [("ada@example.org", "weekly")]
    with pytest.raises(InvalidInput):
        await emails(state="bouncing")


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("E-mail,Email Address", "repeated column(s): email"),
        ("name,tier", "must have an email column"),
        ("email,email", "repeated column(s): email"),
    ],
)
async def test_bad_header_is_a_clear_error_and_imports_nothing(
    context: AudienceContext, db: Database, header: str, expected: str
) -> None:
    """A file from another tool with the wrong columns must fail loudly, not half-import."""
    with pytest.raises(InvalidInput) as raised:
        await _import(context, _csv("ada@example.org,Ada", header=header))
    assert expected in raised.value.detail
    assert await _count(db, subscribers) == 0
