"""`tidings subscribers subscribe EMAIL --newsletter N`: put an existing subscriber on a
newsletter (or back on one they left) with the consent choice explicit — a confirmation email
by default, or `--assert-consent --note "how"` — as the person's page in the admin and
`POST /api/admin/subscribers/{id}/subscriptions` do (issue 38 item 5). Audited."""

from __future__ import annotations

import getpass
import json

import typer

from tidings.audience.memberships import MAX_NOTE_LENGTH, Added, ConsentChoice, Outcome
from tidings.cli.context import container_for, fail, out_console, run
from tidings.domain.audit import Actor

SAID = {
    Outcome.ASKED: "a confirmation email is queued; they are mailed once they click its link",
    Outcome.ASKED_AGAIN: "they had unsubscribed: a confirmation email is queued, and they are "
    "mailed again only once they click its link themselves",
    Outcome.CONFIRMED: "consent recorded with your note; they are mailed from now on",
    Outcome.ALREADY_CONFIRMED: "they were already on it: nothing changed, nothing sent",
}


def subscribe(
    ctx: typer.Context,
    email: str = typer.Argument(..., help="The subscriber's address (any spelling)."),
    newsletter: str = typer.Option(..., "--newsletter", help="The newsletter's slug."),
    assert_consent: bool = typer.Option(
        False,
        "--assert-consent",
        help="You hold their consent: confirm now, recorded with --note. Without it, they "
        "are sent a confirmation email.",
    ),
    note: str | None = typer.Option(
        None,
        "--note",
        help=f"How they consented (where, when; up to {MAX_NOTE_LENGTH} characters). "
        "Required with --assert-consent.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Put an existing subscriber on a newsletter. Refused for a suppressed address, and
    --assert-consent is refused for a newsletter they unsubscribed from: only a confirmation
    email they click can bring them back."""
    if assert_consent and not (note or "").strip():
        fail("--note: say how they consented (where, when) when you assert it", code=2)
    choice = ConsentChoice.ASSERTED if assert_consent else ConsentChoice.CONFIRMATION
    login = getpass.getuser()

    async def go() -> Added:
        async with container_for(ctx) as container:
            person = await container.subscribers.find(email)
            added = await container.memberships.add(
                person.subscriber.id, newsletter, choice=choice, note=note, actor=f"cli:{login}"
            )
            await container.audit.record(Actor.command_line(login), *added.audit(choice))
            return added

    added = run(go)
    if as_json:
        print(
            json.dumps(
                {
                    "subscriber_id": added.subscriber_id,
                    "newsletter": added.newsletter,
                    "outcome": added.outcome.value,
                }
            )
        )
    else:
        out_console.print(f"{added.newsletter_name}: {SAID[added.outcome]}.", markup=False)
