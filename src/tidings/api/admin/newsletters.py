"""Admin newsletters: create, list, get, update, delete (AUD-1)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Path, status
from pydantic import Field

from tidings.access.audit import newsletter_entries
from tidings.api.deps import ContainerDep, KeyActor
from tidings.api.schemas import EmailAddress, HeaderText, RecordView, RequestBody
from tidings.audience.newsletters import NewsletterChanges, NewsletterFields

router = APIRouter(prefix="/newsletters", tags=["admin: newsletters"])
Slug = Annotated[str, Path(max_length=64)]
TrackingChoice = Literal["off", "aggregate", "per_person"]
TRACKING_HELP = (
    "Open and click tracking (ENG-1): `off` (no pixel, no rewritten link), `aggregate` "
    "(counts only, nothing ties a hit to a person), `per_person` (a person's own opens and "
    "clicks, only for subscribers who ticked the consent box; the rest as aggregate)."
)
SUNSET_HELP = (
    "The sunset policy (ENG-7), off by default: people tracked per person who stopped reading "
    "are asked whether to stay, and unsubscribed (reason inactive) without an answer."
)


class NewsletterCreate(RequestBody):
    slug: str = Field(max_length=64, description="URL name: lowercase letters, digits, dashes.")
    name: HeaderText = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=2000)
    sender_name: HeaderText = Field(min_length=1, max_length=200)
    sender_address: EmailAddress
    reply_to: EmailAddress | None = None
    double_opt_in: bool = Field(default=True, description="Require a confirmation click.")
    welcome_subject: HeaderText | None = Field(
        default=None,
        max_length=200,
        description="Subject of the welcome email sent once a person confirms (with "
        "welcome_body); unset: no welcome email.",
    )
    welcome_body: str | None = Field(
        default=None,
        max_length=20_000,
        description="Plain text of the welcome email; blank lines separate paragraphs.",
    )
    archive: bool = Field(
        default=False,
        description="Publish sent issues at /archive/{slug} with Atom and RSS feeds.",
    )
    tracking: TrackingChoice = Field(default="off", description=TRACKING_HELP)


class NewsletterUpdate(RequestBody):
    slug: str | None = Field(default=None, max_length=64)
    name: HeaderText | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=2000)
    sender_name: HeaderText | None = Field(default=None, min_length=1, max_length=200)
    sender_address: EmailAddress | None = None
    reply_to: EmailAddress | None = Field(default=None, description="null clears it.")
    double_opt_in: bool | None = None
    welcome_subject: HeaderText | None = Field(
        default=None,
        max_length=200,
        description='"" or null turns the welcome email off.',
    )
    welcome_body: str | None = Field(default=None, max_length=20_000)
    archive: bool | None = Field(default=None, description="Turn the public archive on or off.")
    tracking: TrackingChoice | None = Field(default=None, description=TRACKING_HELP)
    sunset_enabled: bool | None = Field(default=None, description=SUNSET_HELP)
    sunset_after_days: int | None = Field(
        default=None, description="Sunset: days with no human open or click before asking."
    )
    sunset_min_sends: int | None = Field(
        default=None, description="Sunset: tracked campaigns sent to the person in that span."
    )
    sunset_grace_days: int | None = Field(
        default=None, description="Sunset: days to answer before being unsubscribed."
    )


class NewsletterPublic(RecordView):
    id: int
    slug: str
    name: str
    description: str
    sender_name: str
    sender_address: str
    reply_to: str | None
    double_opt_in: bool
    welcome_subject: str | None
    welcome_body: str | None
    archive: bool
    tracking: str = Field(description=TRACKING_HELP)
    sunset_enabled: bool = Field(description=SUNSET_HELP)
    sunset_after_days: int
    sunset_min_sends: int
    sunset_grace_days: int
    created_at: datetime
    updated_at: datetime


class SunsetDryRun(RecordView):
    """What a sunset run would do now: counts only (addresses: the CLI's --dry-run)."""

    would_ask: int
    would_unsubscribe: int


@router.post("", status_code=status.HTTP_201_CREATED, summary="Create a newsletter")
async def create_newsletter(
    container: ContainerDep, actor: KeyActor, body: NewsletterCreate
) -> NewsletterPublic:
    row = await container.newsletters.create(NewsletterFields(**body.model_dump()))
    await container.audit.record_entries(actor, newsletter_entries(row))
    return NewsletterPublic.of(row)


@router.get("", summary="List newsletters")
async def list_newsletters(container: ContainerDep) -> list[NewsletterPublic]:
    return [NewsletterPublic.of(row) for row in await container.newsletters.list()]


@router.get("/{slug}", summary="One newsletter")
async def get_newsletter(container: ContainerDep, slug: Slug) -> NewsletterPublic:
    return NewsletterPublic.of(await container.newsletters.get(slug))


@router.patch("/{slug}", summary="Change a newsletter")
async def update_newsletter(
    container: ContainerDep, actor: KeyActor, slug: Slug, body: NewsletterUpdate
) -> NewsletterPublic:
    fields = body.model_dump(exclude_unset=True)
    sunset = {
        name.removeprefix("sunset_"): fields.pop(name)
        for name in list(fields)
        if name.startswith("sunset_")
    }
    changes = NewsletterChanges(**fields)
    before = await container.newsletters.get(slug)
    if sunset:  # checked and saved first: a refused value leaves the rest unchanged too
        await container.sunset.configure(slug, **sunset)
        await container.audit.record(actor, "newsletter.sunset", f"newsletter:{before.id}", sunset)
    row = await container.newsletters.update(slug, changes)
    await container.audit.record_entries(actor, newsletter_entries(row, before))
    return NewsletterPublic.of(row)


@router.get("/{slug}/sunset", summary="Sunset dry run: who a run would ask and unsubscribe")
async def sunset_dry_run(container: ContainerDep, slug: Slug) -> SunsetDryRun:
    preview = await container.sunset.dry_run(slug)
    return SunsetDryRun(would_ask=len(preview.asked), would_unsubscribe=len(preview.unsubscribed))


@router.delete("/{slug}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete (if empty)")
async def delete_newsletter(container: ContainerDep, slug: Slug) -> None:
    await container.newsletters.delete(slug)
