"""Admin campaign sends: send now, schedule, unschedule, cancel (SND-1); pause and resume
(SND-23)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, status
from pydantic import BaseModel, Field, ValidationInfo, field_validator

from tidings.api.deps import AdminKeyId, ContainerDep
from tidings.api.schemas import RequestBody
from tidings.campaigns.control import ControlApplied
from tidings.campaigns.lifecycle import SendAccepted
from tidings.domain.clock import NEEDS_TIMEZONE, is_naive
from tidings.domain.errors import InvalidInput
from tidings.domain.local_time import read_local, zone_named

router = APIRouter(prefix="/campaigns", tags=["admin: campaigns"])
CampaignId = Annotated[int, Path(ge=1, le=2**62)]


class ScheduleRequest(RequestBody):
    timezone: str | None = Field(
        default=None,
        max_length=64,
        description="An IANA zone (`Europe/Paris`) in which a `scheduled_at` without an offset "
        "is read. A time that zone skips (a daylight-saving gap) is refused with the reason; "
        "one it has twice (a fold) is its first occurrence. Ignored when `scheduled_at` has an "
        "offset.",
    )
    scheduled_at: datetime = Field(
        description="When to send, at least 30 seconds ahead: with an offset "
        "(`2026-12-01T09:00:00Z`), or a wall-clock time (`2026-12-01T09:00`) read in "
        "`timezone`."
    )

    @field_validator("scheduled_at")
    @classmethod
    def _zoned(cls, value: datetime, info: ValidationInfo) -> datetime:
        if is_naive(value) and info.data.get("timezone") is None:
            raise ValueError(f"{NEEDS_TIMEZONE}, or give a timezone")
        return value

    def moment(self) -> datetime:
        """The instant asked for; InvalidInput naming the field that makes it impossible."""
        if not is_naive(self.scheduled_at):
            return self.scheduled_at
        if self.timezone is None:
            raise InvalidInput(
                f"scheduled_at {NEEDS_TIMEZONE}, or a timezone", field="scheduled_at"
            )
        zone_named(self.timezone, field="timezone")
        return read_local(self.scheduled_at, self.timezone, field="scheduled_at").at


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
    return SendQueued.of(await container.sends.schedule(campaign_id, body.moment()))


class ControlResult(BaseModel):
    campaign_id: int
    action: str = Field(description="`pause`, `resume`, `cancel` or `unschedule`.")
    status: str = Field(description="The campaign's status after it.")
    attempt: int | None = Field(
        description="The send's attempt (none for a draft or a schedule called off)."
    )

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


@router.post(
    "/{campaign_id}/unschedule",
    summary="Put a scheduled campaign back to draft, removing its send job",
)
async def unschedule_campaign(
    container: ContainerDep, key_id: AdminKeyId, campaign_id: CampaignId
) -> ControlResult:
    """The campaign becomes a draft again and its waiting job is removed in the same
    transaction: nothing is sent, nothing stays queued. `409` for any state but `scheduled`
    (a schedule whose time came is a send: pause or cancel it). Audited."""
    applied = await container.control.unschedule(campaign_id, actor=f"admin:{key_id}")
    return ControlResult.of(applied)


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
