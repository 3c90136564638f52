"""The import column `tracking_consent` (ENG-1): an operator asserting, row by row, that a
person agreed to per-person open and click tracking elsewhere."""

import io
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from tests.support import rows
from tests.support.audience import audience_context
from tests.support.clock import Clock
from tidings.audience.context import AudienceContext
from tidings.audience.importer import Importer, ImportReport
from tidings.storage.database import Database
from tidings.storage.tables import subscribers

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


@pytest.fixture
async def context(db: Database, clock: Clock) -> AudienceContext:
    async with db.write() as conn:
        await rows.newsletter(conn, slug="weekly", name="Weekly", sender_address="n@example.org")
    return audience_context(db, clock)


async def _import(context: AudienceContext, *lines: str) -> ImportReport:
    text = "\n".join(["email,tracking_consent", *lines]) + "\n"
    return await Importer(context).import_csv(
        io.StringIO(text, newline="").readlines(), newsletter_slug="weekly", actor="ops"
    )


async def _consents(db: Database) -> dict[str, tuple[datetime | None, str | None]]:
    async with db.read() as conn:
        query = select(
            subscribers.c.email_key,
            subscribers.c.tracking_consent_at,
            subscribers.c.tracking_consent_source,
        )
        return {key: (at, source) for key, at, source in await conn.execute(query)}


async def test_each_accepted_spelling_records_or_withholds_consent(
    context: AudienceContext, db: Database
) -> None:
    """Exports from other tools spell yes and no many ways: each must read as meant, and a
    blank cell must assert nothing."""
    report = await _import(
        context,
        "a@example.org,true",
        "b@example.org,YES",
        "c@example.org,1",
        "d@example.org,false",
        "e@example.org,No",
        "f@example.org,0",
        "g@example.org,",
    )
    assert (report.created, report.failed_rows) == (7, 0)
    found = await _consents(db)
    assert {key for key, (at, _) in found.items() if at is not None} == {
        "a@example.org",
        "b@example.org",
        "c@example.org",
    }
    assert found["a@example.org"] == (START, "import")


async def test_a_value_that_is_not_yes_or_no_fails_the_row_naming_the_field(
    context: AudienceContext, db: Database
) -> None:
    """A typo must never be read as consent: the row fails with the field named and the
    rest of the file still imports."""
    report = await _import(context, "a@example.org,maybe", "b@example.org,true")
    assert (report.created, report.failed_rows) == (1, 1)
    (error,) = report.errors
    assert (error.line, error.field) == (2, "tracking_consent")
    assert "a@example.org" not in error.message  # reports are printed and may be logged
    assert set(await _consents(db)) == {"b@example.org"}


async def test_rows_of_one_address_that_disagree_fail_the_later_row(
    context: AudienceContext, db: Database
) -> None:
    """Which of two contradicting rows the person meant cannot be guessed."""
    text = "email,newsletter,tracking_consent\na@example.org,weekly,yes\na@example.org,other,no\n"
    async with db.write() as conn:
        await rows.newsletter(conn, slug="other", name="Other", sender_address="n@example.org")
    report = await Importer(context).import_csv(
        io.StringIO(text, newline="").readlines(), newsletter_slug="weekly", actor="ops"
    )
    assert report.failed_rows == 1
    assert report.errors[0].field == "tracking_consent"
    assert "line 2" in report.errors[0].message


async def test_reimport_keeps_the_first_consent_and_false_withdraws_it(
    context: AudienceContext, db: Database, clock: Clock
) -> None:
    """When consent was first given is the record; importing the same file again must not
    move it. An import saying no withdraws it, the privacy-safe reading."""
    await _import(context, "a@example.org,true")
    clock.advance(timedelta(days=3))
    again = await _import(context, "a@example.org,true")
    assert again.unchanged == 1
    assert (await _consents(db))["a@example.org"] == (START, "import")
    withdrawn = await _import(context, "a@example.org,false")
    assert withdrawn.updated == 1
    assert (await _consents(db))["a@example.org"] == (None, None)
