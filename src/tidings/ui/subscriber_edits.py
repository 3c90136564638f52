"""Changing subscribers from the admin: add one (with the consent choice explicit), edit
name, tier, labels and custom fields, unsubscribe from one newsletter, and bulk actions
confirmed with their count and recorded in the audit log (issue 25 item 2)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from tidings.audience.bulk import (
    MAX_PICKED,
    NEEDS_LABEL,
    NEEDS_NEWSLETTER,
    BulkAction,
    BulkRequest,
    Selection,
)
from tidings.audience.memberships import ConsentChoice
from tidings.audience.subscribers import SubscriberExists
from tidings.domain.consent import SubscriptionState
from tidings.domain.errors import Conflict, InvalidInput, NotFound
from tidings.ui.guard import CSRF_FIELD, OperatorActor, Session, container_of
from tidings.ui.imports import CONFIRMATION_RATE
from tidings.ui.person import person_page
from tidings.ui.templating import UiRoute, page

router = APIRouter(prefix="/subscribers", route_class=UiRoute)
SubscriberId = Annotated[int, Path(ge=1, le=2**62)]
MAX_FIELD_LINES = 100
MAX_ID = 2**62
NEW_FIELDS = ("email", "name", "tier", "labels", "newsletter", "consent", "note")
ACTION_WORDS = {
    BulkAction.LABEL: "Add the label",
    BulkAction.UNLABEL: "Remove the label",
    BulkAction.UNSUBSCRIBE: "Unsubscribe from the newsletter",
    BulkAction.DELETE: "Delete (privacy erasure)",
    BulkAction.CONFIRM: "Email the confirmation link to those pending in the newsletter",
}


def _labels(text: str) -> list[str]:
    return [label.strip() for label in text.replace(";", ",").split(",") if label.strip()]


def fields_text(attributes: dict[str, Any]) -> str:
    """Custom fields as the edit box shows them: one `key = value` a line."""
    return "\n".join(f"{key} = {value}" for key, value in attributes.items())


def parse_fields(text: str, stored: dict[str, Any]) -> dict[str, Any]:
    """`key = value` lines back into the attributes object. A value shown unchanged keeps its
    stored JSON type (a number imported as 2 stays 2); new or changed values are text."""
    found: dict[str, Any] = {}
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > MAX_FIELD_LINES:
        raise InvalidInput(f"at most {MAX_FIELD_LINES} custom fields", field="attributes")
    for number, line in enumerate(lines, start=1):
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or len(key) > 64:
            raise InvalidInput(
                f"custom fields line {number}: write it as name = value", field="attributes"
            )
        previous = stored.get(key)
        found[key] = previous if previous is not None and str(previous) == value else value
    return found


# -- add ------------------------------------------------------------------------------


async def _new_form(
    request: Request,
    session: Any,
    *,
    values: dict[str, str] | None = None,
    error: InvalidInput | NotFound | Conflict | None = None,
) -> HTMLResponse:
    return page(
        request,
        session,
        "subscriber_new.html",
        status_code=422 if error else 200,
        values=values or {**dict.fromkeys(NEW_FIELDS, ""), "tier": "free", "consent": "confirm"},
        error=error.detail if error else None,
        error_field=error.field if error else None,
        newsletters=await container_of(request).newsletters.list(),
    )


@router.get("/new")
async def new_subscriber(request: Request, session: Session) -> HTMLResponse:
    return await _new_form(request, session)


@router.post("/new")
async def create_subscriber(
    request: Request,
    session: Session,
    email: Annotated[str, Form(max_length=320)] = "",
    name: Annotated[str, Form(max_length=200)] = "",
    tier: Annotated[str, Form(max_length=16)] = "free",
    labels: Annotated[str, Form(max_length=2000)] = "",
    newsletter: Annotated[str, Form(max_length=64)] = "",
    consent: Annotated[str, Form(max_length=16)] = "confirm",
    note: Annotated[str, Form(max_length=150)] = "",
) -> Response:
    values = {
        "email": email,
        "name": name,
        "tier": tier,
        "labels": labels,
        "newsletter": newsletter,
        "consent": consent,
        "note": note,
    }
    asserted = consent == "asserted"
    try:
        if asserted and newsletter and not note.strip():
            raise InvalidInput(
                "say how they consented (where, when), so the record shows it", field="note"
            )
        actor = f"ui:{session.admin_id}" + (f": {' '.join(note.split())}" if asserted else "")
        view = await container_of(request).subscribers.create(
            email=email,
            name=name.strip() or None,
            tier=tier,
            labels=_labels(labels),
            attributes={},
            subscribe_to=[(newsletter, asserted)] if newsletter else [],
            actor=actor,
        )
    except SubscriberExists as known:
        # Not a refusal: the person is here already; offer to put them on the newsletter.
        offer = {
            "newsletter": newsletter,
            "consent": ConsentChoice.ASSERTED if asserted else ConsentChoice.CONFIRMATION,
            "note": note,
        }
        return await person_page(
            request,
            session,
            known.subscriber_id,
            add_values=offer,
            notice=f"{email.strip()} is already a subscriber: here they are. Put them on a "
            "newsletter below (their name, tier and labels are as they were; edit them here).",
        )
    except (InvalidInput, NotFound, Conflict) as refused:
        return await _new_form(request, session, values=values, error=refused)
    return RedirectResponse(f"/admin/subscribers/{view.subscriber.id}", status_code=303)


# -- edit and unsubscribe ------------------------------------------------------------------


@router.get("/{subscriber_id}/edit")
async def edit_form(request: Request, session: Session, subscriber_id: SubscriberId) -> Response:
    view = await container_of(request).subscribers.get(subscriber_id)
    row = view.subscriber
    values = {
        "name": row.name or "",
        "tier": row.tier,
        "labels": ", ".join(view.labels),
        "fields": fields_text(row.attributes),
    }
    return page(
        request, session, "subscriber_edit.html", view=view, values=values, error=None,
        error_field=None,
    )  # fmt: skip


@router.post("/{subscriber_id}/edit")
async def edit(
    request: Request,
    session: Session,
    subscriber_id: SubscriberId,
    name: Annotated[str, Form(max_length=200)] = "",
    tier: Annotated[str, Form(max_length=16)] = "free",
    labels: Annotated[str, Form(max_length=2000)] = "",
    fields: Annotated[str, Form(max_length=20_000)] = "",
) -> Response:
    subscribers = container_of(request).subscribers
    view = await subscribers.get(subscriber_id)
    try:
        await subscribers.update(
            subscriber_id,
            name=name.strip(),
            tier=tier,
            labels=_labels(labels),
            attributes=parse_fields(fields, view.subscriber.attributes),
        )
    except InvalidInput as refused:
        values = {"name": name, "tier": tier, "labels": labels, "fields": fields}
        return page(
            request, session, "subscriber_edit.html", status_code=422, view=view, values=values,
            error=refused.detail, error_field=refused.field,
        )  # fmt: skip
    return RedirectResponse(f"/admin/subscribers/{subscriber_id}", status_code=303)


@router.post("/{subscriber_id}/unsubscribe/{newsletter}")
async def unsubscribe(
    request: Request,
    session: Session,
    subscriber_id: SubscriberId,
    newsletter: Annotated[str, Path(max_length=64)],
) -> Response:
    await container_of(request).subscribers.unsubscribe(subscriber_id, newsletter)
    return RedirectResponse(f"/admin/subscribers/{subscriber_id}", status_code=303)


# -- bulk ------------------------------------------------------------------------------


def _selection(form: Any) -> Selection:
    """The list's filter from the posted form, and the ticked ids unless "all that match"."""
    state = str(form.get("state") or "")
    if state and state not in {s.value for s in SubscriptionState}:
        raise InvalidInput("state must be pending, confirmed or unsubscribed", field="state")
    picked = None
    if form.get("scope") != "all":
        raw = form.getlist("ids")
        if len(raw) > MAX_PICKED:
            raise InvalidInput(f"pick at most {MAX_PICKED}, or choose all that match", field="ids")
        try:
            picked = tuple(int(value) for value in raw)
        except ValueError:
            picked = (0,)
        if not all(1 <= subscriber_id <= MAX_ID for subscriber_id in picked):
            raise InvalidInput("the ticked subscribers are not valid", field="ids")
        if not picked:
            raise InvalidInput(
                "tick the subscribers to act on, or choose all that match the filter",
                field="ids",
            )
    return Selection(
        newsletter=str(form.get("newsletter") or "")[:64] or None,
        state=SubscriptionState(state) if state else None,
        tier=str(form.get("tier") or "")[:16] or None,
        label=str(form.get("label") or "")[:64] or None,
        text=str(form.get("q") or "").strip()[:320] or None,
        picked=picked,
    )


def _request(form: Any) -> BulkRequest:
    try:
        action = BulkAction(str(form.get("action") or ""))
    except ValueError:
        raise InvalidInput("choose what to do with them", field="action") from None
    label = str(form.get("bulk_label") or "").strip()[:64] or None
    newsletter = str(form.get("bulk_newsletter") or "")[:64] or None
    if action in NEEDS_LABEL and not label:
        raise InvalidInput("name the label to add or remove", field="bulk_label")
    if action in NEEDS_NEWSLETTER and not newsletter:
        raise InvalidInput("choose the newsletter", field="bulk_newsletter")
    return BulkRequest(action, _selection(form), label, newsletter)


@router.post("/bulk")
async def bulk_confirm(request: Request, session: Session) -> Response:
    """The confirmation step: what will happen, to how many people, before anything does."""
    form = await request.form()
    bulk = _request(form)
    count = await container_of(request).bulk.count(bulk.selection)
    hidden = [
        (key, str(value))
        for key, value in form.multi_items()
        if key != CSRF_FIELD and isinstance(value, str)
    ]
    return page(
        request,
        session,
        "subscribers_bulk.html",
        bulk=bulk,
        count=count,
        words=ACTION_WORDS[bulk.action],
        hidden=hidden,
    )


@router.post("/bulk/apply")
async def bulk_apply(request: Request, session: Session, actor: OperatorActor) -> Response:
    form = await request.form()
    bulk = _request(form)
    changed = await container_of(request).bulk.apply_by(bulk, actor)
    return RedirectResponse(
        f"/admin/subscribers?done={bulk.action.value}&changed={changed}", status_code=303
    )


@router.post("/confirm-pending")
async def confirm_pending(
    request: Request,
    session: Session,
    newsletter: Annotated[str, Form(max_length=64)],
) -> Response:
    """After an import: the double opt-in email to everyone pending in the newsletter (as
    `tidings subscribers confirm-pending`), queued at the CLI's default rate."""
    queued = await container_of(request).pending_confirmations.ask(
        newsletter, rate_per_second=CONFIRMATION_RATE
    )
    return RedirectResponse(
        f"/admin/subscribers?newsletter={newsletter}&state=pending&done=confirm&changed={queued}",
        status_code=303,
    )
