"""Admin subscribers: search, get, create, update, subscriptions, privacy export and delete."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, status
from pydantic import BaseModel, Field

from tidings.api.deps import AdminKeyId, ContainerDep, KeyActor
from tidings.api.pagination import Cursor, Limit, Page, int_cursor, page_of
from tidings.api.schemas import EmailAddress, HeaderText, RequestBody
from tidings.audience.bulk import MAX_PICKED, BulkAction, BulkRequest, Selection
from tidings.audience.memberships import MAX_NOTE_LENGTH, ConsentChoice, Outcome, clean_note
from tidings.audience.subscribers import SubscriberView
from tidings.domain.consent import SubscriptionState

router = APIRouter(prefix="/subscribers", tags=["admin: subscribers"])
SubscriberId = Annotated[int, Path(ge=1, le=2**62)]
TRACKING_CONSENT_HELP = (
    "True asserts the person agreed to per-person open and click tracking (recorded with "
    "source api and the time of the request)."
)
Labels = Annotated[list[Annotated[str, Field(max_length=64)]], Field(max_length=50)]


class SubscriptionRequest(RequestBody):
    newsletter: str = Field(max_length=64)
    confirmed: bool = Field(
        default=False,
        description=(
            "True records consent asserted by you (the admin key is kept as evidence); "
            "false sends a confirmation email (double opt-in, whatever the newsletter's "
            "setting)."
        ),
    )
    note: str | None = Field(
        default=None,
        max_length=MAX_NOTE_LENGTH,
        description=(
            "How the person consented (where, when): recorded with the evidence. Required "
            "with `confirmed: true` when adding an existing subscriber to a newsletter."
        ),
    )


class SubscriberCreate(RequestBody):
    email: EmailAddress
    name: HeaderText | None = Field(default=None, max_length=200)
    tier: str = Field(default="free", max_length=16)
    labels: Labels = Field(default_factory=list)
    attributes: dict[str, Any] = Field(default_factory=dict)
    subscriptions: list[SubscriptionRequest] = Field(default_factory=list, max_length=100)
    tracking_consent: bool = Field(default=False, description=TRACKING_CONSENT_HELP)


class SubscriberUpdate(RequestBody):
    name: HeaderText | None = Field(default=None, max_length=200)
    tier: str | None = Field(default=None, max_length=16)
    labels: Labels | None = None
    attributes: dict[str, Any] | None = None
    tracking_consent: bool | None = Field(
        default=None, description=TRACKING_CONSENT_HELP + " False withdraws it."
    )


class SubscriptionPublic(BaseModel):
    newsletter: str
    newsletter_name: str
    state: SubscriptionState
    source: str
    created_at: datetime
    confirmed_at: datetime | None
    consent_evidence: str | None
    unsubscribed_at: datetime | None
    unsubscribe_count: int
    last_unsubscribed_at: datetime | None


class SubscriberPublic(BaseModel):
    id: int
    email: str
    name: str | None
    tier: str
    labels: list[str]
    attributes: dict[str, Any]
    suppressed: bool
    subscriptions: list[SubscriptionPublic]
    created_at: datetime
    updated_at: datetime
    tracking_consent: bool = Field(description="Consent to per-person tracking is on record.")
    tracking_consent_at: datetime | None
    tracking_consent_source: str | None = Field(
        description="How it was given: signup, preferences, import or api."
    )

    @classmethod
    def of(cls, view: SubscriberView) -> SubscriberPublic:
        row = view.subscriber
        return cls(
            id=row.id,
            email=row.email,
            name=row.name,
            tier=row.tier,
            labels=view.labels,
            attributes=row.attributes,
            suppressed=view.suppressed,
            subscriptions=[
                SubscriptionPublic(**{k: getattr(s, k) for k in SubscriptionPublic.model_fields})
                for s in view.subscriptions
            ],
            created_at=row.created_at,
            updated_at=row.updated_at,
            tracking_consent=row.tracking_consent_at is not None,
            tracking_consent_at=row.tracking_consent_at,
            tracking_consent_source=row.tracking_consent_source,
        )


class SubscriptionAdded(BaseModel):
    outcome: Outcome = Field(
        description="asked (confirmation email queued), asked_again (they had unsubscribed: "
        "waiting again, email queued), confirmed (your assertion recorded), or "
        "already_confirmed (nothing changed, nothing sent)."
    )
    subscriber: SubscriberPublic


@router.get("", summary="Search subscribers")
async def search_subscribers(
    container: ContainerDep,
    newsletter: Annotated[str | None, Query(max_length=64)] = None,
    state: SubscriptionState | None = None,
    tier: Annotated[str | None, Query(max_length=16)] = None,
    label: Annotated[str | None, Query(max_length=64)] = None,
    q: Annotated[str | None, Query(max_length=200, description="Part of email or name.")] = None,
    limit: Limit = 100,
    cursor: Cursor = None,
) -> Page[SubscriberPublic]:
    views = await container.subscribers.search(
        newsletter=newsletter,
        state=state,
        tier=tier,
        label=label,
        text=q,
        after_id=int_cursor(cursor),
        limit=limit,
    )
    return page_of(views, limit, SubscriberPublic.of, key=lambda view: view.subscriber.id)


@router.post("", status_code=status.HTTP_201_CREATED, summary="Create a subscriber")
async def create_subscriber(
    container: ContainerDep, key_id: AdminKeyId, body: SubscriberCreate
) -> SubscriberPublic:
    """An address that is already a subscriber is refused with 409 and its `subscriber_id`:
    put them on a newsletter with `POST /{subscriber_id}/subscriptions`."""
    # A note on an asserted subscription is recorded with the evidence.
    notes = [clean_note(s.note) for s in body.subscriptions if s.confirmed and s.note]
    notes = [note for note in notes if note]
    view = await container.subscribers.create(
        email=body.email,
        name=body.name,
        tier=body.tier,
        labels=body.labels,
        attributes=body.attributes,
        subscribe_to=[(s.newsletter, s.confirmed) for s in body.subscriptions],
        actor=key_id if not notes else f"{key_id}: {notes[0]}",
        tracking_consent=body.tracking_consent,
    )
    return SubscriberPublic.of(view)


class SubscriberBulk(RequestBody):
    """A bulk action: on the `ids` given, or (without `ids`) on everyone matching the filter
    (`newsletter`, `state`, `tier`, `label`, `q`, as the search takes them)."""

    action: BulkAction
    label: str | None = Field(default=None, max_length=64, description="For label, unlabel.")
    target_newsletter: str | None = Field(
        default=None, max_length=64, description="For unsubscribe and confirm: which newsletter."
    )
    ids: list[Annotated[int, Field(ge=1, le=2**62)]] | None = Field(
        default=None, max_length=MAX_PICKED
    )
    newsletter: str | None = Field(default=None, max_length=64)
    state: SubscriptionState | None = None
    tier: str | None = Field(default=None, max_length=16)
    filter_label: str | None = Field(default=None, max_length=64)
    q: str | None = Field(default=None, max_length=200)


class BulkResult(BaseModel):
    action: BulkAction
    count: int = Field(description="Subscribers changed (for confirm: emails queued).")


@router.post("/bulk", summary="Label, unlabel, unsubscribe, delete or ask to confirm, in bulk")
async def bulk_action(container: ContainerDep, actor: KeyActor, body: SubscriberBulk) -> BulkResult:
    selection = Selection(
        newsletter=body.newsletter,
        state=body.state,
        tier=body.tier,
        label=body.filter_label,
        text=body.q,
        picked=None if body.ids is None else tuple(body.ids),
    )
    request = BulkRequest(body.action, selection, body.label, body.target_newsletter)
    return BulkResult(action=body.action, count=await container.bulk.apply_by(request, actor))


@router.get("/{subscriber_id}", summary="One subscriber with subscriptions")
async def get_subscriber(container: ContainerDep, subscriber_id: SubscriberId) -> SubscriberPublic:
    return SubscriberPublic.of(await container.subscribers.get(subscriber_id))


@router.patch("/{subscriber_id}", summary="Change name, tier, labels or attributes")
async def update_subscriber(
    container: ContainerDep, subscriber_id: SubscriberId, body: SubscriberUpdate
) -> SubscriberPublic:
    view = await container.subscribers.update(
        subscriber_id,
        name=body.name,
        tier=body.tier,
        labels=body.labels,
        attributes=body.attributes,
        tracking_consent=body.tracking_consent,
    )
    return SubscriberPublic.of(view)


@router.post(
    "/{subscriber_id}/subscriptions",
    summary="Put an existing subscriber on a newsletter (or back on one they left)",
)
async def add_subscription(
    container: ContainerDep,
    key_id: AdminKeyId,
    actor: KeyActor,
    subscriber_id: SubscriberId,
    body: SubscriptionRequest,
) -> SubscriptionAdded:
    """`confirmed: false` emails a confirmation link; `confirmed: true` asserts consent and
    needs a `note`. Refused with 409: a suppressed address, or asserting consent for a
    newsletter the person unsubscribed from (only a confirmation email may bring them back)."""
    choice = ConsentChoice.ASSERTED if body.confirmed else ConsentChoice.CONFIRMATION
    added = await container.memberships.add(
        subscriber_id, body.newsletter, choice=choice, note=body.note, actor=key_id
    )
    await container.audit.record(actor, *added.audit(choice))
    view = await container.subscribers.get(subscriber_id)
    return SubscriptionAdded(outcome=added.outcome, subscriber=SubscriberPublic.of(view))


@router.delete("/{subscriber_id}/subscriptions/{newsletter}", summary="Unsubscribe")
async def remove_subscription(
    container: ContainerDep,
    subscriber_id: SubscriberId,
    newsletter: Annotated[str, Path(max_length=64)],
) -> SubscriberPublic:
    return SubscriberPublic.of(await container.subscribers.unsubscribe(subscriber_id, newsletter))


class ActivityPublic(BaseModel):
    """One line of a person's timeline (ENG-6): an open or click (with per-person tracking and
    their consent), a bounce, a complaint or an unsubscribe."""

    at: datetime
    kind: str = Field(description="open, click, bounce, complaint or unsubscribe.")
    campaign_id: int
    campaign: str = Field(description="The campaign's subject.")
    url: str | None = Field(description="The link clicked.")
    verdict: str | None = Field(description="For a hit: human or machine.")
    reason: str | None = Field(description="For a hit: why it was judged so.")
    detail: str | None = Field(description="For a bounce: its kind and code.")


@router.get("/{subscriber_id}/activity", summary="The person's opens, clicks and bounces")
async def subscriber_activity(
    container: ContainerDep,
    subscriber_id: SubscriberId,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> list[ActivityPublic]:
    """Newest first. Opens and clicks appear only for a newsletter tracking per person and
    a subscriber whose consent is on record."""
    await container.subscribers.get(subscriber_id)  # 404 for an unknown id
    entries = await container.activity.of(subscriber_id, limit=limit)
    return [ActivityPublic(**entry.as_json()) for entry in entries]


@router.get("/{subscriber_id}/export", summary="Everything stored about this person (JSON)")
async def export_subscriber(container: ContainerDep, subscriber_id: SubscriberId) -> dict[str, Any]:
    return await container.subscribers.export(subscriber_id)


@router.delete(
    "/{subscriber_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete this person's data (privacy request)",
)
async def delete_subscriber(container: ContainerDep, subscriber_id: SubscriberId) -> None:
    await container.subscribers.delete(subscriber_id)
