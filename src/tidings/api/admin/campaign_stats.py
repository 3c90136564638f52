"""A campaign's results (SND-27): what the provider and the recipients reported back."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from tidings.api.admin.send_views import CampaignStatsPublic
from tidings.api.deps import ContainerDep

router = APIRouter(prefix="/campaigns", tags=["admin: campaigns"])


@router.get("/{campaign_id}/stats", summary="A campaign's delivery, bounce and complaint counts")
async def campaign_stats(
    container: ContainerDep, campaign_id: Annotated[int, Path(ge=1)]
) -> CampaignStatsPublic:
    return CampaignStatsPublic.of(await container.statistics.statistics(campaign_id))
