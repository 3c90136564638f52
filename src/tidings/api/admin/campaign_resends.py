"""Send again (ENG-7): a new draft from a sent campaign for those who did not open, did not
click, were not delivered, or all who got it (audited), and a campaign's link both ways."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, status
from pydantic import Field

from tidings.api.admin.send_views import SEND_AGAIN_SHAPE
from tidings.api.deps import ContainerDep, KeyActor
from tidings.api.schemas import HeaderText, RequestBody
from tidings.domain.send_again import parse_audience

router = APIRouter(prefix="/campaigns", tags=["admin: campaigns"])
CampaignId = Annotated[int, Path(ge=1, le=2**62)]


class SendAgainRequest(RequestBody):
    audience: Literal["not_opened", "not_clicked", "not_delivered", "all"] = Field(
        description="Who of the origin's recipients: those who did not open (a person's human "
        "open or click), did not click, were not delivered, or all who got it. The first two "
        "need a newsletter that tracks per_person."
    )
    subject: HeaderText | None = Field(
        default=None, max_length=998, description="The new draft's subject; the origin's if null."
    )


@router.post(
    "/{campaign_id}/send-again",
    status_code=status.HTTP_201_CREATED,
    summary="Send a sent campaign again: a new draft with a frozen audience (audited)",
)
async def send_again(
    container: ContainerDep, actor: KeyActor, campaign_id: CampaignId, body: SendAgainRequest
) -> dict[str, Any]:
    """The new draft's id and its link (audience_count, left_out by reason). 409
    `send_again_refused` for an origin not sent, or not tracked per person when opens or
    clicks are asked about; 404 for no such campaign."""
    draft, link = await container.send_again.create(
        campaign_id, parse_audience(body.audience), subject=body.subject
    )
    await container.audit.record(actor, *link.audit())
    links = await container.send_again.links(draft.campaign.id)
    return {"id": draft.campaign.id, "status": draft.campaign.status, **links.public()}


@router.get(
    "/{campaign_id}/send-again",
    summary="A campaign's send-again links: its origin and the campaigns sent again from it",
    description=SEND_AGAIN_SHAPE,
)
async def send_again_links(container: ContainerDep, campaign_id: CampaignId) -> dict[str, Any]:
    await container.campaigns.get(campaign_id)  # 404 for no such campaign
    return (await container.send_again.links(campaign_id)).public()
