"""A person's page in the admin, and putting them on another newsletter (or back on one they
left) from it, with the consent choice explicit: a confirmation email, or consent asserted
with a note (issue 38 item 5; the rules in `tidings.audience.memberships`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from tidings.audience.memberships import MAX_NOTE_LENGTH, ConsentChoice, Outcome
from tidings.audience.subscribers import SubscriberView
from tidings.domain.consent import SubscriptionState
from tidings.domain.errors import Conflict, InvalidInput, NotFound
from tidings.ui.guard import OperatorActor, Session, container_of
from tidings.ui.templating import UiRoute, page

router = APIRouter(prefix="/subscribers", route_class=UiRoute)
SubscriberId = Annotated[int, Path(ge=1, le=2**62)]
OUTCOME_WORDS = {
    Outcome.ASKED: "A confirmation email is on its way to them; they are mailed {name} once "
    "they click its link.",
    Outcome.ASKED_AGAIN: "They had unsubscribed from {name}: a confirmation email is on its "
    "way, and they are mailed again only once they click its link themselves.",
    Outcome.CONFIRMED: "They are on {name} now, with your note in the consent history.",
    Outcome.ALREADY_CONFIRMED: "They were already on {name}: nothing changed, nothing was sent.",
}
# How each state shows in the newsletter list of the form ("confirmed" ones are not offered).
STATE_HINTS = {
    None: "",
    SubscriptionState.PENDING: " — waiting for their confirmation",
    SubscriptionState.UNSUBSCRIBED: " — they unsubscribed: only a confirmation email can "
    "bring them back",
}


@dataclass(frozen=True, slots=True)
class Choice:
    slug: str
    label: str
    unsubscribed: bool


async def _choices(request: Request, view: SubscriberView) -> list[Choice]:
    """The newsletters the person may be put on: every one they are not confirmed on."""
    states = {s.newsletter: s.state for s in view.subscriptions}
    choices = []
    for newsletter in await container_of(request).newsletters.list():
        state = states.get(newsletter.slug)
        if state is not SubscriptionState.CONFIRMED:
            hint = STATE_HINTS[state]
            unsubscribed = state is SubscriptionState.UNSUBSCRIBED
            choices.append(Choice(newsletter.slug, newsletter.name + hint, unsubscribed))
    return choices


async def person_page(
    request: Request,
    session: Any,
    subscriber_id: int,
    *,
    status_code: int = 200,
    add_values: dict[str, str] | None = None,
    add_error: InvalidInput | NotFound | Conflict | None = None,
    notice: str | None = None,
) -> HTMLResponse:
    """The person's page; `add_values` and `add_error` fill the "put on a newsletter" form
    (a refused attempt keeps what was typed), `notice` is the banner above it all."""
    container = container_of(request)
    view = await container.subscribers.get(subscriber_id)
    return page(
        request,
        session,
        "person.html",
        status_code=status_code,
        view=view,
        deliveries=await container.audience_stats.deliveries_of(subscriber_id),
        history=await container.subscribers.history(subscriber_id),
        activity=await container.activity.of(subscriber_id),
        choices=await _choices(request, view),
        add=add_values or {"newsletter": "", "consent": ConsentChoice.CONFIRMATION, "note": ""},
        add_error=add_error.detail if add_error else None,
        add_error_field=add_error.field if add_error else None,
        note_limit=MAX_NOTE_LENGTH,
        notice=notice,
    )


@router.get("/{subscriber_id}")
async def person(
    request: Request,
    session: Session,
    subscriber_id: SubscriberId,
    added: Annotated[str, Query(max_length=64)] = "",
    outcome: Annotated[str, Query(max_length=32)] = "",
) -> HTMLResponse:
    notice = None
    if added and outcome in set(Outcome):
        try:
            newsletter = await container_of(request).newsletters.get(added)
        except NotFound:
            pass  # a hand-edited link: no banner
        else:
            notice = OUTCOME_WORDS[Outcome(outcome)].format(name=newsletter.name)
    return await person_page(request, session, subscriber_id, notice=notice)


@router.post("/{subscriber_id}/subscriptions")
async def add_to_newsletter(
    request: Request,
    session: Session,
    actor: OperatorActor,
    subscriber_id: SubscriberId,
    newsletter: Annotated[str, Form(max_length=64)] = "",
    consent: Annotated[str, Form(max_length=16)] = ConsentChoice.CONFIRMATION,
    note: Annotated[str, Form(max_length=MAX_NOTE_LENGTH * 2)] = "",
) -> Response:
    """Put the person on `newsletter` by the chosen consent; a refusal (no newsletter chosen,
    no note with an assertion, an unsubscribe only they can undo, a suppressed address)
    comes back as their page with the form as typed and the reason at the field."""
    values = {"newsletter": newsletter, "consent": consent, "note": note}
    container = container_of(request)
    try:
        if not newsletter:
            raise InvalidInput("choose the newsletter", field="newsletter")
        if consent not in set(ConsentChoice):
            raise InvalidInput("choose how they consent", field="consent")
        choice = ConsentChoice(consent)
        added = await container.memberships.add(
            subscriber_id, newsletter, choice=choice, note=note, actor=f"ui:{session.admin_id}"
        )
    except (InvalidInput, NotFound, Conflict) as refused:
        if isinstance(refused, NotFound) and refused.field is None:
            raise  # no such person: the plain not-found page
        return await person_page(
            request, session, subscriber_id, status_code=422 if isinstance(
                refused, InvalidInput) else 409, add_values=values, add_error=refused,
        )  # fmt: skip
    await container.audit.record(actor, *added.audit(choice))
    return RedirectResponse(
        f"/admin/subscribers/{subscriber_id}?added={added.newsletter}&outcome={added.outcome}",
        status_code=303,
    )
