"""A campaign's results (SND-27, ENG-5): what the provider and the recipients reported back,
and the opens and clicks counted."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from tidings.api.admin.send_views import CampaignStatsPublic, engagement_reach
from tidings.api.deps import ContainerDep

router = APIRouter(prefix="/campaigns", tags=["admin: campaigns"])


@router.get(
    "/{campaign_id}/stats",
    summary="A campaign's delivery, bounce and complaint counts, opens and clicks",
)
async def campaign_stats(
    container: ContainerDep, campaign_id: Annotated[int, Path(ge=1)]
) -> CampaignStatsPublic:
    found = await container.statistics.statistics(campaign_id)
    engagement = await container.engagement_results.campaign(
        campaign_id, reach=engagement_reach(found)
    )
    ab = await container.ab_tests.summary(campaign_id, found)
    send_again = (await container.send_again.links(campaign_id)).public()
    return CampaignStatsPublic.of(found, engagement, ab, send_again)
