"""Putting an existing person on a newsletter by an admin (issue 38 item 5, AUD-3..8), on both
databases: the consent choice is explicit, an assertion carries its note into the consent
history, and a person's own unsubscribe or a suppression is never overridden."""

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from tests.support import rows
from tests.support.audience import audience_context
from tests.support.clock import Clock
from tidings.audience.context import AudienceContext
from tidings.audience.memberships import ConsentChoice, Memberships, Outcome
from tidings.domain.errors import Conflict, InvalidInput, NotFound
from tidings.storage.database import Database
from tidings.storage.tables import jobs, subscriptions

CONFIRM = ConsentChoice.CONFIRMATION
ASSERT = ConsentChoice.ASSERTED


@pytest.fixture
async def context(db: Database) -> AudienceContext:
    return audience_context(db, Clock(datetime(2026, 5, 3, 9, 0, tzinfo=UTC)))


async def _person(db: Database, context: AudienceContext, **state: Any) -> dict[str, int]:
    """A person on `weekly` (pending, confirmed or unsubscribed as `state` says), and a
    `monthly` single opt-in newsletter they are not on."""
    async with db.write() as conn:
        weekly = await rows.newsletter(conn, slug="weekly", name="Weekly")
        monthly = await rows.newsletter(conn, slug="monthly", name="Monthly", double_opt_in=False)
        person = await rows.subscriber(
            conn, email="eve@example.org", email_hash=context.email_hash("eve@example.org")
        )
        await rows.subscription(conn, person, weekly, **state)
    return {"person": person, "weekly": weekly, "monthly": monthly}


async def _subscription(db: Database, person: int, newsletter: int) -> Any:
    async with db.read() as conn:
        query = select(subscriptions).where(
            subscriptions.c.subscriber_id == person, subscriptions.c.newsletter_id == newsletter
        )
        return (await conn.execute(query)).one_or_none()


async def _confirmation_emails(db: Database) -> int:
    async with db.read() as conn:
        queued = [row.payload for row in await conn.execute(select(jobs))]
    return sum(payload.get("purpose") == "confirmation" for payload in queued)


async def test_a_confirmation_email_is_double_opt_in_even_on_a_single_opt_in_newsletter(
    context: AudienceContext, db: Database
) -> None:
    """The admin asked, not the person: even a newsletter that confirms its own sign-ups at
    once must wait for the person's click here, or an admin could sign anyone up silently."""
    ids = await _person(db, context, confirmed_at=datetime(2026, 1, 1, tzinfo=UTC))
    added = await Memberships(context).add(
        ids["person"], "monthly", choice=CONFIRM, note=None, actor="ui:1"
    )
    assert added.outcome is Outcome.ASKED
    row = await _subscription(db, ids["person"], ids["monthly"])
    assert (row.confirmed_at, row.unsubscribed_at, row.source) == (None, None, "admin")
    assert await _confirmation_emails(db) == 1


async def test_asserted_consent_needs_a_note_and_records_it_as_evidence(
    context: AudienceContext, db: Database
) -> None:
    """An assertion is only worth what it says: without a note saying how consent was given
    nothing is changed; with one, the consent history shows who and how."""
    ids = await _person(db, context)
    memberships = Memberships(context)
    for blank in (None, "", "   \n "):
        with pytest.raises(InvalidInput) as refused:
            await memberships.add(ids["person"], "monthly", choice=ASSERT, note=blank, actor="ui:1")
        assert refused.value.field == "note"
    assert await _subscription(db, ids["person"], ids["monthly"]) is None
    with pytest.raises(InvalidInput):
        await memberships.add(ids["person"], "monthly", choice=ASSERT, note="x" * 151, actor="u")
    added = await memberships.add(
        ids["person"], "monthly", choice=ASSERT, note=" asked by\nemail on 3 May ", actor="ui:1"
    )
    assert (added.outcome, added.note) == (Outcome.CONFIRMED, "asked by email on 3 May")
    row = await _subscription(db, ids["person"], ids["monthly"])
    assert row.confirmed_at == context.now()
    assert row.consent_evidence == "admin:ui:1: asked by email on 3 May"
    assert await _confirmation_emails(db) == 0
    # Pending on the weekly: the assertion confirms it too.
    weekly = await memberships.add(
        ids["person"], "weekly", choice=ASSERT, note="signed at the fair", actor="ui:1"
    )
    assert weekly.outcome is Outcome.CONFIRMED


async def test_a_person_who_unsubscribed_comes_back_only_by_their_own_click(
    context: AudienceContext, db: Database
) -> None:
    """SPEC AUD-5/AUD-7: an unsubscribe is the person's. An admin assertion must not undo it;
    a confirmation email may ask, reviving the subscription as waiting with its history."""
    ids = await _person(db, context, unsubscribed=True)
    memberships = Memberships(context)
    with pytest.raises(Conflict) as refused:
        await memberships.add(
            ids["person"], "weekly", choice=ASSERT, note="phoned us", actor="ui:1"
        )
    assert refused.value.field == "consent"
    assert "only they can undo that" in refused.value.detail
    row = await _subscription(db, ids["person"], ids["weekly"])
    assert row.unsubscribed_at is not None
    added = await memberships.add(ids["person"], "weekly", choice=CONFIRM, note=None, actor="u")
    assert added.outcome is Outcome.ASKED_AGAIN
    row = await _subscription(db, ids["person"], ids["weekly"])
    assert (row.unsubscribed_at, row.confirmed_at, row.unsubscribe_count) == (None, None, 1)
    assert row.last_unsubscribed_at is not None  # the history stays
    assert await _confirmation_emails(db) == 1


async def test_a_suppressed_address_is_refused_either_way(
    context: AudienceContext, db: Database
) -> None:
    """A suppression (a bounce, a complaint, an admin's block) stops all mail: lifting it is
    a decision of its own, with its reason recorded, never a side effect of adding."""
    ids = await _person(db, context)
    async with db.write() as conn:
        await rows.suppression(conn, context.email_hash("eve@example.org"))
    for choice, note in ((CONFIRM, None), (ASSERT, "they asked")):
        with pytest.raises(Conflict) as refused:
            await Memberships(context).add(
                ids["person"], "monthly", choice=choice, note=note, actor="u"
            )
        assert "suppressed" in refused.value.detail
    assert await _subscription(db, ids["person"], ids["monthly"]) is None
    assert await _confirmation_emails(db) == 0


async def test_someone_already_confirmed_is_left_alone_and_unknowns_are_not_found(
    context: AudienceContext, db: Database
) -> None:
    """Pressing the button twice must not mail the person again or rewrite their evidence."""
    ids = await _person(db, context, confirmed_at=datetime(2026, 1, 1, tzinfo=UTC))
    memberships = Memberships(context)
    for choice, note in ((CONFIRM, None), (ASSERT, "again")):
        added = await memberships.add(ids["person"], "weekly", choice=choice, note=note, actor="u")
        assert added.outcome is Outcome.ALREADY_CONFIRMED
    assert await _confirmation_emails(db) == 0
    with pytest.raises(NotFound) as missing:
        await memberships.add(ids["person"], "nope", choice=CONFIRM, note=None, actor="u")
    assert missing.value.field == "newsletter"
    with pytest.raises(NotFound):
        await memberships.add(ids["person"] + 99, "weekly", choice=CONFIRM, note=None, actor="u")
