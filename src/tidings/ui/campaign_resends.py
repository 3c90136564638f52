"""Send again on the campaign pages (ENG-7): the sent campaign's form (who, and a new
subject) that makes the new draft, audited; the links both ways are in its templates."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Path, Request
from fastapi.responses import RedirectResponse, Response

from tidings.domain.errors import Conflict, InvalidInput
from tidings.domain.send_again import parse_audience
from tidings.ui.campaign_sends import status_page
from tidings.ui.guard import OperatorActor, Session, container_of
from tidings.ui.templating import UiRoute

router = APIRouter(prefix="/campaigns", route_class=UiRoute)
CampaignId = Annotated[int, Path(ge=1, le=2**62)]


@router.post("/{campaign_id}/send-again")
async def send_again(
    request: Request,
    session: Session,
    actor: OperatorActor,
    campaign_id: CampaignId,
    audience: Annotated[str, Form(max_length=16)],
    subject: Annotated[str, Form(max_length=998)] = "",
) -> Response:
    """A new draft for the chosen part of the recipients; its editor next, or this page with
    the reason when it cannot be made (not sent, or no per-person data)."""
    container = container_of(request)
    try:
        draft, link = await container.send_again.create(
            campaign_id, parse_audience(audience), subject=subject.strip() or None
        )
    except (InvalidInput, Conflict) as refused:
        origin = await container.campaigns.get(campaign_id)
        return await status_page(
            request, session, origin, "", error=refused.detail, status_code=409
        )
    await container.audit.record(actor, *link.audit())
    return RedirectResponse(f"/admin/campaigns/{draft.campaign.id}", status_code=303)
