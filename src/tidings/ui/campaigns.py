"""Campaigns: the list, the editor with live previews per segment at desktop and mobile width,
test send, schedule, cancel and send (confirmed with the preflight count)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from tidings.campaigns.commands import DraftChanges, DraftFields
from tidings.campaigns.copy_outcome import await_outcome
from tidings.campaigns.drafts import CampaignDraft
from tidings.domain.errors import Conflict, InvalidInput, NotFound, TidingsError
from tidings.domain.local_time import read_local
from tidings.domain.segments import TIERS
from tidings.domain.sending import CampaignStatus
from tidings.ui.campaign_ab import AB_FORM_FIELDS, ab_from_form, ab_values
from tidings.ui.campaign_sends import PREVIEW_WIDTHS, status_page
from tidings.ui.guard import OperatorActor, Session, container_of
from tidings.ui.media import media_item
from tidings.ui.templating import PAGE_SIZE, UiRoute, one_page, page

router = APIRouter(prefix="/campaigns", route_class=UiRoute)
CampaignId = Annotated[int, Path(ge=1, le=2**62)]
MAX_BODY = 1_000_000
# The preview frame shows mail, not our page: its own policy, no scripts, no framing elsewhere.
PREVIEW_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src https: data:; "
        "frame-ancestors 'self'; sandbox"
    ),
    "X-Frame-Options": "SAMEORIGIN",
}


class DraftForm:
    """The editor's fields, as posted."""

    def __init__(
        self,
        subject: Annotated[str, Form(max_length=998)],
        body: Annotated[str, Form(max_length=MAX_BODY)],
        preheader: Annotated[str, Form(max_length=500)] = "",
        body_format: Annotated[Literal["markdown", "html"], Form()] = "markdown",
        audience_filter: Annotated[str, Form(max_length=500)] = "",
        sender_name: Annotated[str, Form(max_length=200)] = "",
        reply_to: Annotated[str, Form(max_length=320)] = "",
        archive_public: Annotated[str, Form(max_length=8)] = "",
        archive_public_shown: Annotated[str, Form(max_length=8)] = "",
        ab_shown: Annotated[str, Form(max_length=1)] = "",
        ab_field: Annotated[str, Form(max_length=16)] = "",
        ab_variants: Annotated[str, Form(max_length=2000)] = "",
        ab_test_share: Annotated[str, Form(max_length=8)] = "",
        ab_test_wait: Annotated[str, Form(max_length=16)] = "",
        ab_metric: Annotated[str, Form(max_length=8)] = "clicks",
    ) -> None:
        self.subject = subject
        self.body = body
        self.preheader = preheader
        self.body_format: Literal["markdown", "html"] = body_format
        self.audience_filter = audience_filter.strip()
        self.sender_name = sender_name.strip() or None
        self.reply_to = reply_to.strip() or None
        # The box is a decision only when the operator changed what the page showed; left
        # alone, a new audience filter decides again (and the autosave keeps deciding).
        if archive_public_shown in ("0", "1") and bool(archive_public) != (
            archive_public_shown == "1"
        ):
            self.archive_public = bool(archive_public)
        if ab_shown:  # the A/B section was on the page: what it says is the test (ENG-8)
            self.ab_field, self.ab_variants, self.ab_metric = ab_field, ab_variants, ab_metric
            self.ab_test_share, self.ab_test_wait = ab_test_share or "20", ab_test_wait or "4h"

    def values(self) -> dict[str, Any]:
        """The draft's fields; the A/B section, when it was shown, as the test (or none)."""
        values = {k: v for k, v in vars(self).items() if k not in AB_FORM_FIELDS}
        if "ab_field" in vars(self):
            values["ab"] = ab_from_form(*(getattr(self, name) for name in AB_FORM_FIELDS))
        return values


def draft_values(draft: CampaignDraft) -> dict[str, str]:
    """The editor's fields as stored, as the form shows them."""
    campaign = draft.campaign
    return {
        "subject": campaign.subject,
        "preheader": campaign.preheader,
        "body_format": campaign.body_format,
        "body": campaign.body,
        "audience_filter": campaign.audience_filter,
        "sender_name": campaign.sender_name or "",
        "reply_to": campaign.reply_to or "",
        "archive_public": "True" if campaign.archive_public else "",
        **ab_values(None if draft.ab is None else draft.ab.test),
    }


def typed_values(form: DraftForm) -> dict[str, str]:
    """What the operator typed, exactly, to show again beside a refusal: nothing is lost."""
    return {key: "" if value is None else str(value) for key, value in vars(form).items()}


async def _editor(
    request: Request,
    session: Session,
    campaign_id: int,
    *,
    error: TidingsError | None = None,
    notice: str | None = None,
    typed: dict[str, str] | None = None,
    segment: str = "",
    width: str = "",
) -> HTMLResponse:
    """The editor, its fields as stored overlaid with what was typed; a refusal answers 422
    with its message at the top and at the field it names."""
    container = container_of(request)
    draft = await container.campaigns.get(campaign_id)
    zone = container.settings.site.timezone
    segments = draft.segments or TIERS
    extra = {} if notice is None else {"notice": notice}
    editable = draft.campaign.status in (CampaignStatus.DRAFT, CampaignStatus.SCHEDULED)
    checks = await container.checks.check(campaign_id) if editable else None
    return page(
        request,
        session,
        "campaign_editor.html",
        status_code=422 if error else 200,
        draft=draft,
        values={**draft_values(draft), **(typed or {})},
        error=error.detail if error else None,
        error_field=(error.field or "") if error else "",
        shown_segment=segment if segment in segments else segments[0],
        shown_width=width if width in PREVIEW_WIDTHS else PREVIEW_WIDTHS[0],
        widths=PREVIEW_WIDTHS,
        zones=[zone, "UTC"] if zone != "UTC" else ["UTC"],
        checks=checks,
        send_again=await container.send_again.links(campaign_id),
        media_items=[media_item(container, row) for row in await container.media.search(limit=200)],
        media_max_bytes=container.media.max_bytes,
        **extra,
    )


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


@router.get("")
async def list_campaigns(
    request: Request,
    session: Session,
    before: Annotated[int | None, Query(ge=1, le=2**62)] = None,
) -> HTMLResponse:
    rows = await container_of(request).listing.page(before_id=before, limit=PAGE_SIZE + 1)
    shown, next_before = one_page(rows, key=lambda row: row.campaign.id)
    return page(request, session, "campaigns.html", campaigns=shown, next_before=next_before)


@router.get("/new")
async def new_campaign(request: Request, session: Session) -> HTMLResponse:
    newsletters = await container_of(request).newsletters.list()
    return page(
        request,
        session,
        "campaign_new.html",
        newsletters=newsletters,
        values={},
        error=None,
        error_field="",
    )


@router.post("/new")
async def create_campaign(
    request: Request,
    session: Session,
    form: Annotated[DraftForm, Depends()],
    newsletter: Annotated[str, Form(max_length=64)],
) -> Response:
    container = container_of(request)
    try:
        draft = await container.campaigns.create(newsletter, DraftFields(**form.values()))
    except (InvalidInput, NotFound) as refused:
        return page(
            request,
            session,
            "campaign_new.html",
            status_code=422,
            newsletters=await container.newsletters.list(),
            values={**typed_values(form), "newsletter": newsletter},
            error=refused.detail,
            error_field=refused.field or "",
        )
    return RedirectResponse(f"/admin/campaigns/{draft.campaign.id}", status_code=303)


@router.get("/{campaign_id}")
async def campaign(
    request: Request,
    session: Session,
    campaign_id: CampaignId,
    state: Annotated[str, Query(max_length=16)] = "",
    segment: Annotated[str, Query(max_length=16)] = "",
    width: Annotated[str, Query(max_length=16)] = "",
) -> HTMLResponse:
    container = container_of(request)
    draft = await container.campaigns.get(campaign_id)
    if draft.campaign.status in (CampaignStatus.DRAFT, CampaignStatus.SCHEDULED):
        return await _editor(request, session, campaign_id, segment=segment, width=width)
    return await status_page(request, session, draft, state, segment=segment, width=width)


@router.post("/{campaign_id}")
async def save_draft(
    request: Request,
    session: Session,
    campaign_id: CampaignId,
    form: Annotated[DraftForm, Depends()],
    actor: OperatorActor,
) -> Response:
    container = container_of(request)
    try:
        draft = await container.campaigns.update(campaign_id, DraftChanges(**form.values()))
    except (InvalidInput, Conflict) as refused:
        if _wants_json(request):
            return JSONResponse({"error": refused.detail, "field": refused.field}, status_code=422)
        return await _editor(request, session, campaign_id, error=refused, typed=typed_values(form))
    if "archive_public" in vars(form):
        await container.audit.record(actor, *draft.archive_audit())
    if _wants_json(request):
        saved_at = draft.campaign.updated_at.isoformat()
        return JSONResponse(
            {
                "saved": True,
                "saved_at": saved_at,
                "segments": list(draft.segments),
                "archive_public": draft.campaign.archive_public,
            }
        )
    return RedirectResponse(f"/admin/campaigns/{campaign_id}", status_code=303)


@router.post("/{campaign_id}/archive")
async def archive(
    request: Request,
    session: Session,
    actor: OperatorActor,
    campaign_id: CampaignId,
    public: Annotated[bool, Form()],
) -> Response:
    """Publish a campaign in its newsletter's archive or withdraw it, in any state."""
    container = container_of(request)
    draft = await container.campaigns.set_archive_public(campaign_id, public)
    await container.audit.record(actor, *draft.archive_audit())
    return RedirectResponse(f"/admin/campaigns/{campaign_id}", status_code=303)


@router.get("/{campaign_id}/preview")
async def preview(
    request: Request,
    session: Session,
    campaign_id: CampaignId,
    segment: Annotated[str | None, Query(max_length=16)] = None,
    format: Annotated[Literal["html", "text"], Query()] = "html",
) -> Response:
    shown = await container_of(request).campaigns.preview(campaign_id, segment)
    if format == "text":
        return Response(shown.text, media_type="text/plain; charset=utf-8", headers=PREVIEW_HEADERS)
    return Response(shown.html, media_type="text/html; charset=utf-8", headers=PREVIEW_HEADERS)


TEST_SEND_WAIT_SECONDS = 5.0


@router.post("/{campaign_id}/test-send")
async def send_test_copy(
    request: Request,
    session: Session,
    campaign_id: CampaignId,
    to: Annotated[str, Form(max_length=2000)],
    segment: Annotated[str, Form(max_length=16)] = "",
) -> Response:
    container = container_of(request)
    addresses = [part.strip() for part in to.replace(";", ",").split(",") if part.strip()]
    try:
        if not 1 <= len(addresses) <= 10:
            raise InvalidInput("give 1 to 10 addresses, separated by commas", field="to")
        job_ids = await container.campaigns.test_send(campaign_id, addresses, segment or None)
    except InvalidInput as refused:
        typed = {"to": to, "test_segment": segment}
        return await _editor(request, session, campaign_id, error=refused, typed=typed)
    # Say what happened, not what was asked: the message is a job a worker hands over.
    outcome = await await_outcome(container.queue, job_ids, within_seconds=TEST_SEND_WAIT_SECONDS)
    if outcome.failing:
        failed = InvalidInput(outcome.message(), field="to")
        return await _editor(request, session, campaign_id, error=failed, typed={"to": to})
    return await _editor(request, session, campaign_id, notice=outcome.message())


def schedule_time(typed: str, zone: str, site_zone: str) -> datetime:
    """The form's date and time, read in `zone` (the site's or UTC; an offset typed with it
    wins), as an aware datetime; InvalidInput naming `scheduled_at` otherwise, or for a time
    the zone skips (a DST gap)."""
    if zone not in (site_zone, "UTC"):
        raise InvalidInput(f"the time zone must be {site_zone} or UTC", field="scheduled_at")
    try:
        at = datetime.fromisoformat(typed.strip())
    except ValueError:
        raise InvalidInput(
            "scheduled_at must be a date and time, e.g. 2026-12-24 09:00", field="scheduled_at"
        ) from None
    # A wall time in a DST gap is refused with the reason; one in a fold is its first
    # occurrence (domain/local_time.py); both are shown in UTC once scheduled.
    return read_local(at, zone, field="scheduled_at").at if at.tzinfo is None else at


@router.post("/{campaign_id}/schedule")
async def schedule(
    request: Request,
    session: Session,
    campaign_id: CampaignId,
    scheduled_at: Annotated[str, Form(max_length=40)],
    zone: Annotated[str, Form(max_length=64)] = "UTC",
) -> Response:
    container = container_of(request)
    try:
        at = schedule_time(scheduled_at, zone, container.settings.site.timezone)
        await container.sends.schedule(campaign_id, at)
    except (InvalidInput, Conflict) as refused:
        typed = {"scheduled_at": scheduled_at, "zone": zone}
        if not refused.field:
            refused.field = "scheduled_at"
        return await _editor(request, session, campaign_id, error=refused, typed=typed)
    return RedirectResponse(f"/admin/campaigns/{campaign_id}", status_code=303)


@router.get("/{campaign_id}/send")
async def confirm_send(request: Request, session: Session, campaign_id: CampaignId) -> Response:
    container = container_of(request)
    draft = await container.campaigns.get(campaign_id)
    recipients = await container.sends.audience_size(campaign_id)
    unjudged = await container.sends.unjudged_count(campaign_id)
    return page(
        request,
        session,
        "campaign_send.html",
        draft=draft,
        recipients=recipients,
        unjudged=unjudged,
        checks=await container.checks.check(campaign_id),
    )


@router.post("/{campaign_id}/clone")
async def clone(request: Request, session: Session, campaign_id: CampaignId) -> Response:
    """Copy any campaign into a new draft and open it."""
    draft = await container_of(request).campaigns.clone(campaign_id)
    return RedirectResponse(f"/admin/campaigns/{draft.campaign.id}", status_code=303)


@router.post("/{campaign_id}/send")
async def send(request: Request, session: Session, campaign_id: CampaignId) -> Response:
    """Send now. A second click (or a resent form) finds the send under way: it lands on the
    send's page like the first, rather than on an error; the send starts once either way."""
    container = container_of(request)
    try:
        await container.sends.send(campaign_id)
    except Conflict:
        draft = await container.campaigns.get(campaign_id)
        if draft.campaign.status in (CampaignStatus.DRAFT, CampaignStatus.SCHEDULED):
            raise  # refused for a reason of its own (nobody to send to): say so
    return RedirectResponse(f"/admin/campaigns/{campaign_id}", status_code=303)
