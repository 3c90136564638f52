"""A campaign's results (SND-27): what the provider and the readers reported back."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from tidings.api.deps import ContainerDep
from tidings.campaigns.statistics import CampaignStatistics, Counts

router = APIRouter(prefix="/campaigns", tags=["admin: campaigns"])


class CountsPublic(BaseModel):
    sent: int
    delivered: int
    hard_bounced: int
    soft_bounced: int
    complained: int
    unsubscribed: int = Field(description="Through this campaign's unsubscribe links.")
    rates: dict[str, float] = Field(description="Each count as a share of `sent`.")

    @classmethod
    def of(cls, counts: Counts) -> CountsPublic:
        return cls(
            sent=counts.sent,
            delivered=counts.delivered,
            hard_bounced=counts.hard_bounced,
            soft_bounced=counts.soft_bounced,
            complained=counts.complained,
            unsubscribed=counts.unsubscribed,
            rates=counts.rates(),
        )


class CampaignStatsPublic(BaseModel):
    campaign_id: int
    total: CountsPublic
    segments: dict[str, CountsPublic] = Field(
        description="By segment (`free`, `paid`...; `excluded`: never handed over)."
    )

    @classmethod
    def of(cls, found: CampaignStatistics) -> CampaignStatsPublic:
        return cls(
            campaign_id=found.campaign_id,
            total=CountsPublic.of(found.total),
            segments={name: CountsPublic.of(counts) for name, counts in found.segments.items()},
        )


@router.get("/{campaign_id}/stats", summary="A campaign's delivery, bounce and complaint counts")
async def campaign_stats(
    container: ContainerDep, campaign_id: Annotated[int, Path(ge=1)]
) -> CampaignStatsPublic:
    return CampaignStatsPublic.of(await container.statistics.statistics(campaign_id))
