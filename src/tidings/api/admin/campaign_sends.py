"""Admin campaign sends: send now, schedule, cancel (SND-1); pause and resume (SND-23)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, status
from pydantic import BaseModel, Field

from tidings.api.deps import AdminKeyId, ContainerDep
from tidings.api.schemas import AwareDateTime, RequestBody
from tidings.campaigns.control import ControlApplied
from tidings.campaigns.lifecycle import SendAccepted

router = APIRouter(prefix="/campaigns", tags=["admin: campaigns"])
CampaignId = Annotated[int, Path(ge=1, le=2**62)]


class ScheduleRequest(RequestBody):
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


class ControlResult(BaseModel):
    campaign_id: int
    action: str = Field(description="`pause`, `resume` or `cancel`.")
    status: str = Field(description="The campaign's status after it.")
    attempt: int | None = Field(description="The send's attempt (none for a draft cancelled).")

    @classmethod
    def of(cls, applied: ControlApplied) -> ControlResult:
        return cls(
            campaign_id=applied.campaign_id,
            action=applied.action,
            status=applied.status.value,
            attempt=applied.attempt,
        )


@router.post(
    "/{campaign_id}/cancel",
    summary="Cancel a draft, a scheduled campaign, or a send in progress or paused",
)
async def cancel_campaign(
    container: ContainerDep, key_id: AdminKeyId, campaign_id: CampaignId
) -> ControlResult:
    """A send in progress stops at each worker's next chunk (chunks already handed over are
    recorded); every recipient never handed over ends `cancelled`. Audited."""
    return ControlResult.of(await container.control.cancel(campaign_id, actor=f"admin:{key_id}"))


@router.post("/{campaign_id}/pause", summary="Pause a send in progress")
async def pause_campaign(
    container: ContainerDep, key_id: AdminKeyId, campaign_id: CampaignId
) -> ControlResult:
    """Nothing new is handed over from the next chunk on; a paused send waits (through
    restarts) for resume or cancel. Audited."""
    return ControlResult.of(await container.control.pause(campaign_id, actor=f"admin:{key_id}"))


@router.post(
    "/{campaign_id}/resume",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Resume a paused send, in the same attempt",
)
async def resume_campaign(
    container: ContainerDep, key_id: AdminKeyId, campaign_id: CampaignId
) -> ControlResult:
    """The same attempt carries on from the same frozen recipients. Audited."""
    return ControlResult.of(await container.control.resume(campaign_id, actor=f"admin:{key_id}"))
