"""Admin campaign status (SND-17, SND-18) and the recipient listing by state (SND-13)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from tidings.api.admin.campaign_sends import CampaignId
from tidings.api.admin.send_views import RecipientPublic, SendStatusPublic
from tidings.api.deps import ContainerDep
from tidings.api.pagination import Cursor, Limit, Page, int_cursor, page_of
from tidings.domain.sending import RecipientState

router = APIRouter(prefix="/campaigns", tags=["admin: campaigns"])
StateName = Literal["pending", "sending", "sent", "failed", "excluded", "uncertain"]


@router.get("/{campaign_id}/status", summary="A campaign's send: phase, progress, ETA, outcome")
async def campaign_status(container: ContainerDep, campaign_id: CampaignId) -> SendStatusPublic:
    return SendStatusPublic.of(campaign_id, await container.send_status.status(campaign_id))


@router.get(
    "/{campaign_id}/recipients",
    summary="A campaign's recipients in one state, with their Message-IDs",
)
async def campaign_recipients(
    container: ContainerDep,
    campaign_id: CampaignId,
    state: Annotated[StateName, Query(description="e.g. `uncertain` or `failed`.")],
    limit: Limit = 100,
    cursor: Cursor = None,
) -> Page[RecipientPublic]:
    rows = await container.send_status.recipients(
        campaign_id, RecipientState(state), after_id=int_cursor(cursor), limit=limit
    )
    return page_of(rows, limit, RecipientPublic.of, key=lambda row: row.id)
