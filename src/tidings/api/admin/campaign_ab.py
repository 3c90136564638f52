"""A campaign's A/B test (ENG-8): its fields in a draft, its state and figures, and the
operator's pick of a winner before the wait is over (audited)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path
from pydantic import Field

from tidings.api.deps import ContainerDep, KeyActor
from tidings.api.schemas import HeaderText, RequestBody
from tidings.domain.ab_tests import MAX_SHARE, MIN_SHARE, AbTest, build_test

router = APIRouter(prefix="/campaigns", tags=["admin: campaigns"])
CampaignId = Annotated[int, Path(ge=1, le=2**62)]


class AbTestFields(RequestBody):
    """An A/B test of one field: the campaign's own value is variant A (the default), the
    alternatives are B, C and D."""

    field: Literal["subject", "preheader", "sender_name"] = "subject"
    alternatives: list[HeaderText] = Field(min_length=1, max_length=3)
    test_share: int = Field(
        default=20, ge=MIN_SHARE, le=MAX_SHARE, description="Percent of the audience tested."
    )
    test_wait: str = Field(
        default="4h", max_length=16, description="How long to wait before choosing: 30m, 4h, 1d."
    )
    metric: Literal["clicks", "opens"] = Field(
        default="clicks", description="People's unique clicks, or people's unique opens."
    )

    def to_test(self) -> AbTest | None:
        return build_test(
            {self.field: list(self.alternatives)},
            test_share=self.test_share,
            test_wait=self.test_wait,
            metric=self.metric,
        )


class PickWinner(RequestBody):
    variant: str = Field(max_length=2, description="A, B, C or D.")


@router.get("/{campaign_id}/ab", summary="A campaign's A/B test: state, decision and figures")
async def ab_test(container: ContainerDep, campaign_id: CampaignId) -> dict[str, Any] | None:
    """The test as `tidings campaign stats --json` shows it under `ab`."""
    found = await container.statistics.statistics(campaign_id)  # 404 for no such campaign
    return await container.ab_tests.summary(campaign_id, found)


@router.post(
    "/{campaign_id}/ab/winner",
    summary="Pick an A/B test's winner by hand, before the wait is over (audited)",
)
async def pick_winner(
    container: ContainerDep, actor: KeyActor, campaign_id: CampaignId, body: PickWinner
) -> dict[str, Any] | None:
    await container.ab_tests.pick(campaign_id, body.variant)
    await container.audit.record(
        actor,
        "campaign.ab_winner_picked",
        f"campaign:{campaign_id}",
        {"variant": body.variant.strip().upper()},
    )
    return await container.ab_tests.summary(campaign_id)
