"""A campaign once it is sent: live progress (phase, processed/total, ETA), the failure banner
with the reason and whether a retry is safe, retry, the reconcile form, and when it is done
the verification summary and the recipients by state."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Form, Path, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from tidings.campaigns.control import CANCELLABLE_SEND
from tidings.campaigns.drafts import CampaignDraft
from tidings.campaigns.listing import send_started
from tidings.campaigns.reconcile import ReconcileRefused
from tidings.campaigns.retry import RetryRefused
from tidings.campaigns.statistics import CampaignStatistics, per_hour
from tidings.domain.errors import Conflict, InvalidInput, NotFound
from tidings.domain.segments import TIERS
from tidings.domain.send_status import SendingStatus
from tidings.domain.sending import ACTIVE, BatchStatus, CampaignStatus, RecipientState
from tidings.engagement.results import Reach
from tidings.ui.chart import LineChart, line_chart
from tidings.ui.engagement import engagement_charts
from tidings.ui.guard import Session, container_of
from tidings.ui.templating import UiRoute, page, status_word

router = APIRouter(prefix="/campaigns", route_class=UiRoute)
CampaignId = Annotated[int, Path(ge=1, le=2**62)]
RECIPIENTS_SHOWN = 200
PREVIEW_WIDTHS = ("desktop", "phone")
DELIVERED = frozenset({"delivered"})
PROBLEMS = frozenset({"hard_bounce", "soft_bounce", "complaint"})
CANCELLABLE = frozenset({CampaignStatus.DRAFT, CampaignStatus.SCHEDULED, *CANCELLABLE_SEND})
CLOSE_WAIT_SECONDS = 3.0
CLOSE_POLL_SECONDS = 0.1


def eta_words(seconds: int | None) -> str:
    """An ETA as an operator reads it: `about 3 min`, or a dash before there is one."""
    if seconds is None:
        return "estimating…"
    if seconds < 60:
        return f"about {seconds} s"
    if seconds < 3600:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds // 3600} h {round(seconds % 3600 / 60)} min"


def duration_words(started: datetime | None, finished: datetime | None) -> str:
    """How long a send took, as an operator says it: `2 min 5 s`, `1 h 3 min`, `40 s`."""
    if started is None or finished is None:
        return "—"
    seconds = max(int((finished - started).total_seconds()), 0)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def progress_labels(status: SendingStatus) -> dict[str, str]:
    """The progress panel's words, and the badge's: both read `stage`, one source, so the
    badge and the phase never disagree (the script updates both from this)."""
    stage = status_word(status.stage)
    return {
        "stage": stage,
        "phase": stage,
        "counts": f"{status.completed:,} of {status.total:,} recipients processed",
        "eta": eta_words(status.eta_seconds),
    }


def following(status: SendingStatus) -> bool:
    """Whether the page keeps polling: a send under way, or a cancel still closing."""
    return status.status in ACTIVE or status.closing


async def status_page(
    request: Request,
    session: Session,
    draft: CampaignDraft,
    state: str,
    *,
    error: str | None = None,
    status_code: int = 200,
    segment: str = "",
    width: str = "",
) -> HTMLResponse:
    container = container_of(request)
    campaign_id = draft.campaign.id
    send = await container.sends.get_send(campaign_id)
    started = send_started(draft.campaign.status, send, draft.campaign.scheduled_at)
    finished = send.finished_at if send else None
    status = await container.send_status.status(campaign_id)
    shown_state = state if state in {s.value for s in RecipientState} else ""
    if not shown_state and status.status == CampaignStatus.SUBMITTED:
        shown_state = RecipientState.FAILED.value if status.recipients.failed else ""
    recipients = []
    if shown_state:
        recipients = await container.send_status.recipients(
            campaign_id, RecipientState(shown_state), after_id=None, limit=RECIPIENTS_SHOWN
        )
    results = await container.statistics.statistics(campaign_id, timeline=True)
    engagement = await container.engagement_results.campaign(
        campaign_id, reach=Reach(results.total.sent, results.total.delivered)
    )
    segments = draft.segments or TIERS
    return page(
        request,
        session,
        "campaign_status.html",
        status_code=status_code,
        draft=draft,
        results=results,
        charts=result_charts(results),
        engagement=engagement,
        engagement_charts=engagement_charts(engagement),
        ab=await container.ab_tests.summary(campaign_id, results),
        send_again=await container.send_again.links(campaign_id),
        status=status,
        active=status.status in ACTIVE,
        following=following(status),
        labels=progress_labels(status),
        states=[s.value for s in RecipientState],
        shown_state=shown_state,
        recipients=recipients,
        error=error,
        started=started,
        finished=finished,
        took=duration_words(started, finished),
        shown_segment=segment if segment in segments else segments[0],
        shown_width=width if width in PREVIEW_WIDTHS else PREVIEW_WIDTHS[0],
        widths=PREVIEW_WIDTHS,
    )


def result_charts(results: CampaignStatistics) -> list[tuple[str, LineChart]]:
    """Events heard back per hour (SND-27): deliveries, and bounces with complaints."""
    charts = []
    for label, kinds, what in (
        ("Deliveries per hour", DELIVERED, "deliveries"),
        ("Bounces and complaints per hour", PROBLEMS, "bounces and complaints"),
    ):
        hours, counts = per_hour(results.timeline, kinds)
        if hours:
            charts.append((label, line_chart(hours, counts, what=what, unit="hours")))
    return charts


@router.get("/{campaign_id}/progress")
async def progress(request: Request, session: Session, campaign_id: CampaignId) -> JSONResponse:
    status = await container_of(request).send_status.status(campaign_id)
    return JSONResponse(
        {
            "done": not following(status),
            "status": status.status.value,
            "completed": status.completed,
            "total": status.total,
            "labels": progress_labels(status),
        },
        headers={"Cache-Control": "no-store"},
    )


async def _refused(
    request: Request, session: Session, campaign_id: CampaignId, message: str
) -> HTMLResponse:
    draft = await container_of(request).campaigns.get(campaign_id)
    return await status_page(request, session, draft, "", error=message, status_code=409)


@router.post("/{campaign_id}/retry")
async def retry(request: Request, session: Session, campaign_id: CampaignId) -> Response:
    container = container_of(request)
    try:
        await container.retries.retry(campaign_id, actor=f"ui:{session.admin_id}")
    except RetryRefused as refused:
        return await _refused(request, session, campaign_id, refused.detail)
    return RedirectResponse(f"/admin/campaigns/{campaign_id}", status_code=303)


@router.post("/{campaign_id}/reconcile")
async def reconcile(
    request: Request,
    session: Session,
    campaign_id: CampaignId,
    batch_id: Annotated[int, Form(ge=1, le=2**62)],
    outcome: Annotated[Literal["submitted", "failed"], Form()],
    note: Annotated[str, Form(min_length=1, max_length=500)],
) -> Response:
    container = container_of(request)
    try:
        await container.reconciler.reconcile(
            campaign_id,
            batch_id,
            BatchStatus(outcome),
            note=note,
            actor=f"ui:{session.admin_id}",
        )
    except (ReconcileRefused, NotFound, InvalidInput) as refused:
        return await _refused(request, session, campaign_id, refused.detail)
    return RedirectResponse(f"/admin/campaigns/{campaign_id}", status_code=303)


async def _control(
    request: Request,
    session: Session,
    campaign_id: int,
    action: Literal["pause", "resume", "cancel"],
) -> Response:
    """Pause, resume or cancel (SND-23; cancel also a draft or a schedule), audited as
    `ui:<admin id>`. A refusal (not sending, not paused) is shown on the page."""
    control = container_of(request).control
    apply = {"pause": control.pause, "resume": control.resume, "cancel": control.cancel}[action]
    try:
        await apply(campaign_id, actor=f"ui:{session.admin_id}")
    except Conflict as refused:
        return await _refused(request, session, campaign_id, refused.detail)
    return RedirectResponse(f"/admin/campaigns/{campaign_id}", status_code=303)


@router.post("/{campaign_id}/pause")
async def pause(request: Request, session: Session, campaign_id: CampaignId) -> Response:
    return await _control(request, session, campaign_id, "pause")


@router.post("/{campaign_id}/resume")
async def resume(request: Request, session: Session, campaign_id: CampaignId) -> Response:
    return await _control(request, session, campaign_id, "resume")


@router.get("/{campaign_id}/cancel")
async def confirm_cancel(request: Request, session: Session, campaign_id: CampaignId) -> Response:
    """Cancelling is for good, so it is asked first, on a page of its own (it works without
    the script): what will happen, with unschedule offered for a scheduled campaign."""
    return await _cancel_page(request, session, campaign_id)


async def _cancel_page(
    request: Request, session: Session, campaign_id: int, *, status_code: int = 200
) -> HTMLResponse:
    container = container_of(request)
    draft = await container.campaigns.get(campaign_id)
    status = await container.send_status.status(campaign_id)
    return page(
        request,
        session,
        "campaign_cancel.html",
        status_code=status_code,
        draft=draft,
        status=status,
        labels=progress_labels(status),
        cancellable=status.status in CANCELLABLE,
    )


@router.post("/{campaign_id}/cancel")
async def cancel(
    request: Request,
    session: Session,
    campaign_id: CampaignId,
    confirmed: Annotated[str, Form(max_length=8)] = "",
) -> Response:
    """Cancel for good, once confirmed on the page above. A post without the confirmation
    (a hand-made request) gets that page, 400, and nothing changes. Right after a send's
    cancel, the close is waited for (a few seconds at most) so the page shows its totals."""
    if confirmed != "yes":
        return await _cancel_page(request, session, campaign_id, status_code=400)
    response = await _control(request, session, campaign_id, "cancel")
    if response.status_code == 303:
        await _await_close(request, campaign_id)
    return response


@router.post("/{campaign_id}/unschedule")
async def unschedule(request: Request, session: Session, campaign_id: CampaignId) -> Response:
    """A scheduled campaign back to draft, its job removed; the editor opens again."""
    container = container_of(request)
    try:
        await container.control.unschedule(campaign_id, actor=f"ui:{session.admin_id}")
    except Conflict as refused:
        return await _refused(request, session, campaign_id, refused.detail)
    return RedirectResponse(f"/admin/campaigns/{campaign_id}", status_code=303)


async def _await_close(request: Request, campaign_id: int) -> None:
    """Wait, bounded, for a cancelled send's close (the finalise step a worker runs once no
    batch is held). The page shows the totals it will keep either way; this makes them the
    recorded ones when a worker is there to close it."""
    reader = container_of(request).send_status
    deadline = asyncio.get_running_loop().time() + CLOSE_WAIT_SECONDS
    while (await reader.status(campaign_id)).closing:
        if asyncio.get_running_loop().time() > deadline:
            return
        await asyncio.sleep(CLOSE_POLL_SECONDS)
