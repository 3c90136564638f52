"""Campaigns: the list, the editor with live previews per segment at desktop and mobile width,
test send, schedule, cancel and send (confirmed with the preflight count)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from tidings.campaigns.commands import DraftChanges, DraftFields
from tidings.campaigns.test_outcome import await_outcome
from tidings.domain.errors import Conflict, InvalidInput, NotFound
from tidings.domain.sending import CampaignStatus
from tidings.ui.campaign_sends import status_page
from tidings.ui.guard import Session, container_of
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
    ) -> None:
        self.subject = subject
        self.body = body
        self.preheader = preheader
        self.body_format: Literal["markdown", "html"] = body_format
        self.audience_filter = audience_filter.strip()
        self.sender_name = sender_name.strip() or None
        self.reply_to = reply_to.strip() or None


async def _editor(
    request: Request,
    session: Session,
    campaign_id: int,
    *,
    error: str | None = None,
    notice: str | None = None,
) -> HTMLResponse:
    """The editor as stored, with what the last action said (a refusal answers 422)."""
    draft = await container_of(request).campaigns.get(campaign_id)
    extra = {} if notice is None else {"notice": notice}
    return page(
        request,
        session,
        "campaign_editor.html",
        status_code=422 if error else 200,
        draft=draft,
        error=error,
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
    rows = await container_of(request).campaigns.list_campaigns(
        before_id=before, limit=PAGE_SIZE + 1
    )
    shown, next_before = one_page(rows, key=lambda row: row.id)
    results = await container_of(request).statistics.summaries([row.id for row in shown])
    return page(
        request,
        session,
        "campaigns.html",
        campaigns=shown,
        next_before=next_before,
        results=results,
    )


@router.get("/new")
async def new_campaign(request: Request, session: Session) -> HTMLResponse:
    newsletters = await container_of(request).newsletters.list()
    return page(request, session, "campaign_new.html", newsletters=newsletters, error=None)


@router.post("/new")
async def create_campaign(
    request: Request,
    session: Session,
    form: Annotated[DraftForm, Depends()],
    newsletter: Annotated[str, Form(max_length=64)],
) -> Response:
    container = container_of(request)
    try:
        draft = await container.campaigns.create(newsletter, DraftFields(**vars(form)))
    except (InvalidInput, NotFound) as refused:
        return page(
            request,
            session,
            "campaign_new.html",
            status_code=422,
            newsletters=await container.newsletters.list(),
            error=refused.detail,
        )
    return RedirectResponse(f"/admin/campaigns/{draft.campaign.id}", status_code=303)


@router.get("/{campaign_id}")
async def campaign(
    request: Request,
    session: Session,
    campaign_id: CampaignId,
    state: Annotated[str, Query(max_length=16)] = "",
) -> HTMLResponse:
    container = container_of(request)
    draft = await container.campaigns.get(campaign_id)
    if draft.campaign.status in (CampaignStatus.DRAFT, CampaignStatus.SCHEDULED):
        return page(request, session, "campaign_editor.html", draft=draft, error=None)
    return await status_page(request, session, draft, state)


@router.post("/{campaign_id}")
async def save_draft(
    request: Request,
    session: Session,
    campaign_id: CampaignId,
    form: Annotated[DraftForm, Depends()],
) -> Response:
    container = container_of(request)
    try:
        draft = await container.campaigns.update(campaign_id, DraftChanges(**vars(form)))
    except (InvalidInput, Conflict) as refused:
        if _wants_json(request):
            return JSONResponse({"error": refused.detail}, status_code=422)
        return await _editor(request, session, campaign_id, error=refused.detail)
    if _wants_json(request):
        return JSONResponse({"saved": True, "segments": list(draft.segments)})
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
        return await _editor(request, session, campaign_id, error=refused.detail)
    # Say what happened, not what was asked: the message is a job a worker hands over.
    outcome = await await_outcome(container.queue, job_ids, within_seconds=TEST_SEND_WAIT_SECONDS)
    if outcome.failing:
        return await _editor(request, session, campaign_id, error=outcome.message())
    return await _editor(request, session, campaign_id, notice=outcome.message())


@router.post("/{campaign_id}/schedule")
async def schedule(
    request: Request,
    session: Session,
    campaign_id: CampaignId,
    scheduled_at: Annotated[str, Form(max_length=40)],
) -> Response:
    container = container_of(request)
    try:
        at = datetime.fromisoformat(scheduled_at)
    except ValueError:
        raise InvalidInput("scheduled_at must be a date and time", field="scheduled_at") from None
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at  # the form's time is UTC
    await container.sends.schedule(campaign_id, at)
    return RedirectResponse(f"/admin/campaigns/{campaign_id}", status_code=303)


@router.get("/{campaign_id}/send")
async def confirm_send(request: Request, session: Session, campaign_id: CampaignId) -> Response:
    container = container_of(request)
    draft = await container.campaigns.get(campaign_id)
    recipients = await container.sends.audience_size(campaign_id)
    return page(request, session, "campaign_send.html", draft=draft, recipients=recipients)


@router.post("/{campaign_id}/clone")
async def clone(request: Request, session: Session, campaign_id: CampaignId) -> Response:
    """Copy any campaign into a new draft and open it."""
    draft = await container_of(request).campaigns.clone(campaign_id)
    return RedirectResponse(f"/admin/campaigns/{draft.campaign.id}", status_code=303)


@router.post("/{campaign_id}/send")
async def send(request: Request, session: Session, campaign_id: CampaignId) -> Response:
    await container_of(request).sends.send(campaign_id)
    return RedirectResponse(f"/admin/campaigns/{campaign_id}", status_code=303)
