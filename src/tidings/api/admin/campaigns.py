"""Admin campaigns: drafts (create, list, get, edit, delete), preview, checks before sending
and test send."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Response, status
from pydantic import BaseModel, Field

from tidings.api.admin.campaign_ab import AbTestFields
from tidings.api.deps import ContainerDep, KeyActor
from tidings.api.pagination import Cursor, Limit, Page, int_cursor, page_of
from tidings.api.schemas import AwareDateTime, EmailAddress, HeaderText, RecordView, RequestBody
from tidings.campaigns.commands import DraftChanges, DraftFields
from tidings.campaigns.drafts import CampaignDraft

router = APIRouter(prefix="/campaigns", tags=["admin: campaigns"])
CampaignId = Annotated[int, Path(ge=1, le=2**62)]
MAX_BODY = 1_000_000
ARCHIVE_PUBLIC = (
    "In the newsletter's public archive and feeds (API-4). Left out, it is decided by the "
    "audience filter: public when the filter is empty, not public when any filter is set."
)


class CampaignFields(RequestBody):
    subject: HeaderText = Field(min_length=1, max_length=998)
    preheader: HeaderText = Field(default="", max_length=500)
    body: str = Field(max_length=MAX_BODY, description="Markdown (default) or HTML.")
    body_format: Literal["markdown", "html"] = "markdown"
    audience_filter: str = Field(
        default="",
        max_length=500,
        description="e.g. `tier:paid`, `label:beta`, `tier:free+label:beta`, `!label:press`, "
        "`attr:city=Paris` (a custom field); "
        "`,` separates alternatives. Empty: the whole newsletter.",
    )
    sender_name: HeaderText | None = Field(default=None, max_length=200)
    reply_to: EmailAddress | None = None
    scheduled_at: AwareDateTime | None = None
    archive_public: bool | None = Field(default=None, description=ARCHIVE_PUBLIC)
    ab_test: AbTestFields | None = Field(default=None, description="An A/B test (ENG-8).")


class CampaignCreate(CampaignFields):
    newsletter: str = Field(max_length=64, description="The newsletter's slug.")


class CampaignUpdate(RequestBody):
    subject: HeaderText | None = Field(default=None, min_length=1, max_length=998)
    preheader: HeaderText | None = Field(default=None, max_length=500)
    body: str | None = Field(default=None, max_length=MAX_BODY)
    body_format: Literal["markdown", "html"] | None = None
    audience_filter: str | None = Field(default=None, max_length=500)
    sender_name: HeaderText | None = Field(default=None, max_length=200, description="null clears.")
    reply_to: EmailAddress | None = Field(default=None, description="null clears it.")
    scheduled_at: AwareDateTime | None = None
    archive_public: bool | None = Field(
        default=None,
        description=ARCHIVE_PUBLIC
        + " Editable in any state, alone; a new audience_filter without it decides it again.",
    )
    ab_test: AbTestFields | None = Field(default=None, description="null removes the test.")


class CampaignSummary(RecordView):
    id: int
    newsletter_id: int
    status: str
    subject: str
    audience_filter: str
    archive_public: bool
    scheduled_at: datetime | None
    created_at: datetime
    updated_at: datetime


class CampaignPublic(BaseModel):
    """What is stored, as stored: input rules are not re-applied to answers."""

    id: int
    newsletter: str
    status: str
    subject: str
    preheader: str
    body: str
    body_format: Literal["markdown", "html"]
    audience_filter: str
    sender_name: str | None
    reply_to: str | None
    scheduled_at: datetime | None
    segments: list[str] = Field(description="Tiers the audience filter can reach.")
    archive_public: bool = Field(description="In the newsletter's public archive and feeds.")
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, draft: CampaignDraft) -> CampaignPublic:
        row = draft.campaign
        return cls(
            id=row.id,
            newsletter=draft.newsletter.slug,
            status=row.status,
            subject=row.subject,
            preheader=row.preheader,
            body=row.body,
            body_format="html" if row.body_format == "html" else "markdown",
            audience_filter=row.audience_filter,
            sender_name=row.sender_name,
            reply_to=row.reply_to,
            scheduled_at=row.scheduled_at,
            segments=list(draft.segments),
            archive_public=row.archive_public,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


class TestSend(RequestBody):
    to: list[EmailAddress] = Field(min_length=1, max_length=10)
    segment: str | None = Field(default=None, max_length=16)


class TestSendQueued(BaseModel):
    job_ids: list[int]


@router.post("", status_code=status.HTTP_201_CREATED, summary="Create a draft")
async def create_campaign(
    container: ContainerDep, actor: KeyActor, body: CampaignCreate
) -> CampaignPublic:
    ab = None if body.ab_test is None else body.ab_test.to_test()
    fields = DraftFields(**body.model_dump(exclude={"newsletter", "ab_test"}), ab=ab)
    draft = await container.campaigns.create(body.newsletter, fields)
    if body.archive_public is not None:
        await container.audit.record(actor, *draft.archive_audit())
    return CampaignPublic.of(draft)


@router.post(
    "/{campaign_id}/clone",
    status_code=status.HTTP_201_CREATED,
    summary="Copy a campaign (any state) into a new draft",
)
async def clone_campaign(container: ContainerDep, campaign_id: CampaignId) -> CampaignPublic:
    return CampaignPublic.of(await container.campaigns.clone(campaign_id))


@router.get("", summary="List campaigns, newest first")
async def list_campaigns(
    container: ContainerDep,
    newsletter: Annotated[str | None, Query(max_length=64)] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> Page[CampaignSummary]:
    rows = await container.campaigns.list_campaigns(
        newsletter=newsletter, before_id=int_cursor(cursor), limit=limit
    )
    return page_of(rows, limit, CampaignSummary.of, key=lambda row: row.id)


@router.get("/{campaign_id}", summary="One campaign")
async def get_campaign(container: ContainerDep, campaign_id: CampaignId) -> CampaignPublic:
    return CampaignPublic.of(await container.campaigns.get(campaign_id))


@router.patch("/{campaign_id}", summary="Edit a draft, or any campaign's archive_public alone")
async def update_campaign(
    container: ContainerDep, actor: KeyActor, campaign_id: CampaignId, body: CampaignUpdate
) -> CampaignPublic:
    changes = DraftChanges(**body.model_dump(exclude_unset=True, exclude={"ab_test"}))
    if "ab_test" in body.model_fields_set:
        ab = None if body.ab_test is None else body.ab_test.to_test()
        changes = dataclasses.replace(changes, ab=ab)
    draft = await container.campaigns.update(campaign_id, changes)
    if "archive_public" in body.model_fields_set:
        await container.audit.record(actor, *draft.archive_audit())
    return CampaignPublic.of(draft)


@router.delete("/{campaign_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete a draft")
async def delete_campaign(container: ContainerDep, campaign_id: CampaignId) -> None:
    await container.campaigns.delete(campaign_id)


@router.get(
    "/{campaign_id}/preview",
    summary="A segment's version as a sample reader sees it (HTML or text)",
    response_class=Response,
)
async def preview_campaign(
    container: ContainerDep,
    campaign_id: CampaignId,
    segment: Annotated[str | None, Query(max_length=16)] = None,
    format: Annotated[Literal["html", "text"], Query()] = "html",
) -> Response:
    shown = await container.campaigns.preview(campaign_id, segment)
    headers = {"X-Tidings-Warnings": " | ".join(shown.warnings)} if shown.warnings else None
    if format == "text":
        return Response(shown.text, media_type="text/plain; charset=utf-8", headers=headers)
    return Response(shown.html, media_type="text/html; charset=utf-8", headers=headers)


class CheckWarning(RecordView):
    code: str = Field(description="e.g. `html_clipped`, `image_without_alt`, `insecure_link`.")
    message: str
    segments: list[str] = Field(
        description="The segments whose version it concerns; empty: the whole campaign."
    )
    count: int | None = Field(description="For a merge tag: the recipients without a value.")


class CampaignChecks(RecordView):
    campaign_id: int
    warnings: list[CheckWarning]


@router.get(
    "/{campaign_id}/checks",
    summary="Checks before sending (CMP-8): warnings, never refusals",
)
async def campaign_checks(container: ContainerDep, campaign_id: CampaignId) -> CampaignChecks:
    report = await container.checks.check(campaign_id)
    return CampaignChecks.model_validate(report.public())


@router.post(
    "/{campaign_id}/test-send",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Send a segment's version to up to 10 addresses (state and counts untouched)",
)
async def test_send(
    container: ContainerDep, campaign_id: CampaignId, body: TestSend
) -> TestSendQueued:
    job_ids = await container.campaigns.test_send(campaign_id, body.to, body.segment)
    return TestSendQueued(job_ids=job_ids)
