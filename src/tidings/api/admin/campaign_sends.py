"""Admin campaign sends: send now, schedule, cancel (SND-1)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, status
from pydantic import BaseModel, Field

from tidings.api.deps import ContainerDep
from tidings.api.schemas import AwareDateTime
from tidings.campaigns.lifecycle import SendAccepted

router = APIRouter(prefix="/campaigns", tags=["admin: campaigns"])
CampaignId = Annotated[int, Path(ge=1, le=2**62)]


class ScheduleRequest(BaseModel):
    scheduled_at: AwareDateTime = Field(
        description="When to send, with a timezone (e.g. `2026-12-01T09:00:00Z`); at least 30 "
        "seconds ahead."
    )


class SendQueued(BaseModel):
    campaign_id: int
    status: str
    attempt: int
    preflight_email_count: int = Field(
        description="The consent-filtered audience size when the send was queued."
    )
    scheduled_at: datetime | None
    job_id: int

    @classmethod
    def of(cls, accepted: SendAccepted) -> SendQueued:
        return cls(
            campaign_id=accepted.campaign_id,
            status=accepted.status.value,
            attempt=accepted.attempt,
            preflight_email_count=accepted.preflight_email_count,
            scheduled_at=accepted.scheduled_at,
            job_id=accepted.job_id,
        )


@router.post(
    "/{campaign_id}/send",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Send a draft (or a scheduled campaign) now",
)
async def send_campaign(container: ContainerDep, campaign_id: CampaignId) -> SendQueued:
    return SendQueued.of(await container.sends.send(campaign_id))


@router.post(
    "/{campaign_id}/schedule",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Send a draft at a later time",
)
async def schedule_campaign(
    container: ContainerDep, campaign_id: CampaignId, body: ScheduleRequest
) -> SendQueued:
    return SendQueued.of(await container.sends.schedule(campaign_id, body.scheduled_at))


@router.post(
    "/{campaign_id}/cancel",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Cancel a draft or scheduled campaign",
)
async def cancel_campaign(container: ContainerDep, campaign_id: CampaignId) -> None:
    await container.sends.cancel(campaign_id)
