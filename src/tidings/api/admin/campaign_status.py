"""Admin campaign status (SND-17, SND-18) and the recipient listing by state (SND-13)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from tidings.api.admin.campaign_sends import CampaignId
from tidings.api.deps import ContainerDep
from tidings.api.pagination import Cursor, Limit, Page, int_cursor, page_of
from tidings.campaigns.send_status import CampaignRecipient
from tidings.domain.send_status import SendingStatus
from tidings.domain.sending import RecipientState

router = APIRouter(prefix="/campaigns", tags=["admin: campaigns"])
StateName = Literal["pending", "sending", "sent", "failed", "excluded", "uncertain"]


class RecipientCounts(BaseModel):
    sent: int
    failed: int
    excluded: int
    uncertain: int


class SendStatusPublic(BaseModel):
    campaign_id: int
    status: str
    attempt: int | None = Field(description="The send's attempt (1, then one more per retry).")
    phase: Literal["preparing", "submitting"] | None = Field(
        description="While sending: `preparing` until any batch has left pending, then "
        "`submitting`."
    )
    completed: int = Field(description="Recipients processed: sent, failed, excluded, uncertain.")
    total: int
    eta: int | None = Field(
        description="Seconds until the current phase's work is done: null until two timing "
        "samples exist in this phase and attempt, and for a failed send; 0 when no work "
        "remains. Key completion on `status`, never on this."
    )
    failed_during: str | None = Field(description="A failed send: `preparing` or `submitting`.")
    retryable: bool
    error_code: str | None
    error: str | None
    recipients: RecipientCounts

    @classmethod
    def of(cls, campaign_id: int, found: SendingStatus) -> SendStatusPublic:
        totals = found.recipients
        return cls(
            campaign_id=campaign_id,
            status=found.status.value,
            attempt=found.attempt,
            phase=found.phase.value if found.phase else None,
            completed=found.completed,
            total=found.total,
            eta=found.eta_seconds,
            failed_during=found.failed_during,
            retryable=found.retryable,
            error_code=found.error_code,
            error=found.error,
            recipients=RecipientCounts(
                sent=totals.sent,
                failed=totals.failed,
                excluded=totals.excluded,
                uncertain=totals.uncertain,
            ),
        )


class RecipientPublic(BaseModel):
    id: int
    batch_id: int | None
    subscriber_id: int | None
    address: str | None
    message_id: str | None = Field(description="Look this up at the provider.")
    state: str
    reason: str | None

    @classmethod
    def of(cls, row: CampaignRecipient) -> RecipientPublic:
        return cls(
            id=row.id,
            batch_id=row.batch_id,
            subscriber_id=row.subscriber_id,
            address=row.address,
            message_id=row.message_id,
            state=row.state,
            reason=row.reason,
        )


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
