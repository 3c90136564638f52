"""Putting an existing person on a newsletter — another one, or back on one they left — by an
admin, with the consent choice explicit (issue 38 item 5, AUD-3..8).

The choice is one of two, never implied:

- **Send a confirmation email** (double opt-in, whatever the newsletter's own setting: the
  admin asked, the person did not): a new or waiting subscription waits for the person's
  click, and gets a fresh link; earlier links stay valid (AUD-5).
- **Assert consent**, with a required note saying how it was given (on paper at a fair, by
  email on 3 May…): the subscription is confirmed now, and the consent history records
  `admin:<who>: <note>` as its evidence.

The rule for someone who left (SPEC AUD-5, AUD-7: an unsubscribe is the person's, and only
they can undo it): an admin may not assert consent for a newsletter the person unsubscribed
from — that is refused, naming the way that remains; a confirmation email may be sent, which
revives the subscription as *waiting* (history kept, nothing mailed to them until they click
the link themselves). A suppressed address (AUD-8) is refused either way: the suppression
must be lifted first, with its reason recorded. Someone already confirmed stays as they are
and is sent nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tidings.audience.consent import ConsentRecorder, state_of
from tidings.audience.context import AudienceContext
from tidings.domain import consent
from tidings.domain.audience import Source
from tidings.domain.consent import SubscriptionState
from tidings.domain.errors import Conflict, InvalidInput, NotFound
from tidings.storage import newsletters as newsletter_queries
from tidings.storage import subscribers as subscriber_queries
from tidings.storage import subscriptions as subscription_queries
from tidings.storage import suppressions as suppression_queries

MAX_NOTE_LENGTH = 150  # the evidence column holds `admin:<who>: <note>` in 200 characters


class ConsentChoice(StrEnum):
    CONFIRMATION = "confirmation"  # email the person a confirmation link
    ASSERTED = "asserted"  # the admin holds their consent (with a note saying how)


class Outcome(StrEnum):
    ASKED = "asked"  # a confirmation email is queued; they wait for the click
    ASKED_AGAIN = "asked_again"  # they had unsubscribed: revived as waiting, email queued
    CONFIRMED = "confirmed"  # consent asserted and recorded
    ALREADY_CONFIRMED = "already_confirmed"  # nothing changed, nothing sent


@dataclass(frozen=True, slots=True)
class Added:
    subscriber_id: int
    newsletter: str
    newsletter_name: str
    outcome: Outcome
    note: str | None

    def audit(self, choice: ConsentChoice) -> tuple[str, str, dict[str, Any]]:
        """The audit log's entry: who was put on which newsletter, how, with what note."""
        detail = {"newsletter": self.newsletter, "consent": choice.value, "outcome": self.outcome}
        return (
            "subscriber.subscribed",
            f"subscriber:{self.subscriber_id}",
            {
                **detail,
                **({"note": self.note} if self.note else {}),
            },
        )


def clean_note(note: str | None) -> str | None:
    """One line, trimmed; None when blank. Refused past MAX_NOTE_LENGTH characters."""
    text = " ".join((note or "").split())
    if len(text) > MAX_NOTE_LENGTH:
        raise InvalidInput(f"the note must be at most {MAX_NOTE_LENGTH} characters", field="note")
    return text or None


class Memberships:
    def __init__(self, context: AudienceContext) -> None:
        self._ctx = context
        self._consent = ConsentRecorder(context)

    async def add(
        self,
        subscriber_id: int,
        slug: str,
        *,
        choice: ConsentChoice,
        note: str | None,
        actor: str,
    ) -> Added:
        """Put subscriber `subscriber_id` on newsletter `slug` by `choice` (the module's
        rules). `actor` names the admin (`ui:<operator id>`, an API key id, `cli:<login>`)."""
        note = clean_note(note)
        if choice is ConsentChoice.ASSERTED and note is None:
            raise InvalidInput(
                "say how they consented (where, when), so the consent history shows it",
                field="note",
            )
        now = self._ctx.now()
        async with self._ctx.db.write() as conn:
            row = await subscriber_queries.get(conn, subscriber_id)
            if row is None:
                raise NotFound(f"no subscriber with id {subscriber_id}")
            newsletter = await newsletter_queries.get_by_slug(conn, slug)
            if newsletter is None:
                raise NotFound(f"no newsletter called {slug!r}", field="newsletter")
            if await suppression_queries.is_suppressed(conn, row.email_hash):
                raise Conflict(
                    "the address is suppressed: no mail of any kind goes to it. Lift the "
                    "suppression first (saying why), then add them",
                    field="newsletter",
                )
            existing = await subscription_queries.get(conn, row.id, newsletter.id)
            before = None if existing is None else state_of(existing)
            if before is SubscriptionState.CONFIRMED:
                outcome = Outcome.ALREADY_CONFIRMED
            elif choice is ConsentChoice.ASSERTED:
                if before is SubscriptionState.UNSUBSCRIBED:
                    raise Conflict(
                        f"they unsubscribed from {newsletter.name} themselves, and only they "
                        "can undo that: send them a confirmation email instead (they are "
                        "mailed again only once they click it)",
                        field="consent",
                    )
                subscription, before = await self._consent.subscription(
                    conn, row.id, newsletter.id, source=Source.ADMIN, now=now
                )
                decision = consent.decide(before, consent.AssertConsent(f"{actor}: {note}"))
                assert isinstance(decision, consent.Transition)  # not unsubscribed: checked
                await self._consent.record(
                    conn, subscription, decision, now=now, owners=(row, newsletter),
                    asserted_by=actor,
                )  # fmt: skip
                outcome = Outcome.CONFIRMED
            else:
                await self._consent.request(
                    conn, row, newsletter, source=Source.ADMIN, now=now, double_opt_in=True
                )
                revived = before is SubscriptionState.UNSUBSCRIBED
                outcome = Outcome.ASKED_AGAIN if revived else Outcome.ASKED
        return Added(row.id, newsletter.slug, newsletter.name, outcome, note)
