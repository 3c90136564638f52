"""Importing the files people have (issue 13 item 5): other tools' exports, `;` and tab
delimiters, a bare list of addresses, `--map`, the mailable/waiting summary, and asking the
waiting ones to confirm through the queue."""

import io
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from tests.support import rows
from tests.support.audience import audience_context
from tests.support.clock import Clock
from tidings.audience.confirm_pending import PendingConfirmations
from tidings.audience.context import AudienceContext
from tidings.audience.import_header import parse_column_map
from tidings.audience.importer import Importer, ImportReport
from tidings.domain.errors import InvalidInput, NotFound
from tidings.storage import suppressions as suppression_queries
from tidings.storage.database import Database
from tidings.storage.tables import jobs, subscribers, subscriptions


@pytest.fixture
async def context(db: Database) -> AudienceContext:
    async with db.write() as conn:
        await rows.newsletter(conn, slug="weekly", name="Weekly", sender_address="w@example.org")
    return audience_context(db, Clock(datetime(2026, 3, 1, 12, 0, tzinfo=UTC)))


async def _import(context: AudienceContext, text: str, **options: Any) -> ImportReport:
    lines = io.StringIO(text, newline="").readlines()
    return await Importer(context).import_csv(
        lines, newsletter_slug="weekly", actor="ops", **options
    )


async def _people(db: Database) -> dict[str, tuple[str | None, bool, bool]]:
    """address -> (name, confirmed, unsubscribed)."""
    async with db.read() as conn:
        query = select(
            subscribers.c.email,
            subscribers.c.name,
            subscriptions.c.confirmed_at,
            subscriptions.c.unsubscribed_at,
        ).join(subscriptions, subscriptions.c.subscriber_id == subscribers.c.id)
        return {
            row.email: (row.name, row.confirmed_at is not None, row.unsubscribed_at is not None)
            for row in await conn.execute(query)
        }


MAILCHIMP = (
    "Email Address,First Name,Last Name,Address,Phone Number,MEMBER_RATING,OPTIN_TIME,TAGS\n"
    'ada@example.org,Ada,Lovelace,"1 Loop St, London",,2,2020-01-02 10:00:00,"beta"\n'
    "bob@example.org,Bob,,,,1,2021-03-04 11:00:00,\n"
)


async def test_a_mailchimp_export_imports_with_names_joined_and_extra_columns_listed(
    context: AudienceContext, db: Database
) -> None:
    """People move from Mailchimp with the file it gives them; renaming columns by hand
    first is where imports go wrong."""
    report = await _import(context, MAILCHIMP)
    assert (report.created, report.failed_rows) == (2, 0)
    assert report.ignored_columns == ["MEMBER_RATING"]
    assert report.attribute_columns == ["Address", "Phone Number"]
    assert await _people(db) == {
        "ada@example.org": ("Ada Lovelace", False, False),
        "bob@example.org": ("Bob", False, False),
    }
    assert (report.mailable, report.awaiting_confirmation) == (0, 2)


async def test_semicolon_and_tab_files_and_other_tools_statuses(
    context: AudienceContext, db: Database
) -> None:
    """Spreadsheets in many locales save with `;`, and listmonk exports carry their own
    statuses: a blocklisted person must arrive suppressed (and nothing else of them kept),
    an enabled one waiting."""
    semicolon = "e-mail;name;status\ncy@example.org;Cy, Jr.;confirmed\n"
    listmonk = (
        "uuid\temail\tname\tattributes\tstatus\tcreated_at\tupdated_at\n"
        'u1\tdee@example.org\tDee\t{"city": "Oslo", "kids": 2}\tenabled\t'
        "2022-04-06T07:42:08.000Z\t\n"
        "u2\teve@example.org\tEve\t{}\tblocklisted\t2022-04-06T07:42:08Z\t\n"
    )
    first = await _import(context, semicolon)
    second = await _import(context, listmonk)
    assert (first.failed_rows, second.failed_rows) == (0, 0)
    assert (first.mailable, first.awaiting_confirmation) == (1, 0)
    assert (second.mailable, second.awaiting_confirmation, second.suppressed) == (0, 1, 1)
    assert second.ignored_columns == ["uuid", "updated_at"]
    assert second.attribute_columns == ["attributes"]
    assert await _people(db) == {
        "cy@example.org": ("Cy, Jr.", True, False),
        "dee@example.org": ("Dee", False, False),
    }
    async with db.read() as conn:
        assert await suppression_queries.reason_of(conn, context.email_hash("eve@example.org")) == (
            "admin"
        )


async def test_a_list_of_bare_addresses_needs_no_header(
    context: AudienceContext, db: Database
) -> None:
    """The simplest file there is — one address a line — must not lose its first reader."""
    report = await _import(context, "ann@example.org\nBOB@Example.org\n\nnot-an-address\n")
    assert (report.total_rows, report.created, report.failed_rows) == (3, 2, 1)
    assert [(error.line, error.field) for error in report.errors] == [(4, "email")]
    assert set(await _people(db)) == {"ann@example.org", "BOB@example.org"}


async def test_map_names_the_columns_no_alias_covers(
    context: AudienceContext, db: Database
) -> None:
    """A file from a tool nobody foresaw still imports when the operator says which column
    is which, and a column that would clash can be ignored."""
    text = "Contact,Who,email\nann@example.org,Ann,old@example.org\n"
    with pytest.raises(InvalidInput) as no_email:
        await _import(context, "Contact,Who\nann@example.org,Ann\n")
    assert "--map COLUMN=email" in no_email.value.detail
    mapping = parse_column_map(["contact=email", "WHO=name", "email="])
    report = await _import(context, text, column_map=mapping)
    assert (report.created, report.failed_rows, report.ignored_columns) == (1, 0, ["email"])
    assert await _people(db) == {"ann@example.org": ("Ann", False, False)}
    for bad in (["contact"], ["contact=phone"]):
        with pytest.raises(InvalidInput) as raised:
            parse_column_map(bad)
        assert raised.value.field == "map"
    with pytest.raises(InvalidInput) as missing:
        await _import(context, text, column_map=parse_column_map(["phone=name"]))
    assert "phone" in missing.value.detail


async def test_confirm_pending_queues_one_email_per_waiting_subscription_only(
    context: AudienceContext, db: Database
) -> None:
    """Asking an imported list to confirm must reach exactly the people still waiting: never
    someone confirmed, unsubscribed or suppressed."""
    await _import(
        context,
        "email,status\nann@example.org,pending\nbob@example.org,confirmed\n"
        "cy@example.org,unsubscribed\ndee@example.org,\neve@example.org,\n",
    )
    async with db.write() as conn:
        await suppression_queries.suppress(
            conn,
            context.email_hash("eve@example.org"),
            reason="complaint",
            note=None,
            actor="test",
            now=context.now(),
        )
    progress: list[int] = []
    asked = await PendingConfirmations(context).ask(
        "weekly", rate_per_second=1000, on_progress=progress.append
    )
    assert asked == 2
    assert progress[-1] == 2
    async with db.read() as conn:
        queued = [(row.kind, row.payload) for row in await conn.execute(select(jobs))]
        address = {row.id: row.email for row in await conn.execute(select(subscribers))}
    # Ids only: the link is minted, and the mail rendered, when the job sends it.
    assert {(kind, payload["purpose"]) for kind, payload in queued} == {
        ("send_subscriber_email", "confirmation")
    }
    assert sorted(address[payload["subscriber_id"]] for _, payload in queued) == [
        "ann@example.org",
        "dee@example.org",
    ]
    with pytest.raises(NotFound):
        await PendingConfirmations(context).ask("nope", rate_per_second=10)
    with pytest.raises(InvalidInput):
        await PendingConfirmations(context).ask("weekly", rate_per_second=0)


async def _attributes(db: Database) -> dict[str, dict[str, Any]]:
    async with db.read() as conn:
        query = select(subscribers.c.email, subscribers.c.attributes)
        return {row.email: row.attributes for row in await conn.execute(query)}


async def test_extra_columns_and_listmonk_attributes_become_custom_fields(
    context: AudienceContext, db: Database
) -> None:
    """Custom fields (AUD-12) arrive with the people: Mailchimp's merge-field columns and
    listmonk's `attributes` JSON. A re-import merges (a blank cell keeps the stored value), a
    row whose JSON is not an object imports without it, with a warning naming line, column
    and value, and bookkeeping is named as ignored."""
    await _import(context, MAILCHIMP)
    listmonk = (
        "email,attributes,City,uuid\n"
        'ada@example.org,"{""plan"": ""gold"", ""kids"": 2}",Paris,u1\n'
        "bob@example.org,,,u2\n"
        "cy@example.org,[1],,u3\n"
    )
    report = await _import(context, listmonk)
    assert (report.created, report.updated, report.unchanged, report.failed_rows) == (1, 1, 1, 0)
    assert [(w.line, w.column, w.value) for w in report.warnings] == [(4, "attributes", "[1]")]
    assert (report.attribute_columns, report.ignored_columns) == (["attributes", "City"], ["uuid"])
    assert await _attributes(db) == {
        "ada@example.org": {
            "address": "1 Loop St, London",
            "plan": "gold",
            "kids": 2,
            "city": "Paris",
        },
        "bob@example.org": {},
        "cy@example.org": {},
    }
