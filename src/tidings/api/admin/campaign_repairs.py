"""Admin repairs to a send: retry (SND-19), reconcile a batch and resend (SND-13). Each one is
audited with the admin key that asked for it."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, status
from pydantic import BaseModel, ConfigDict, Field

from tidings.api.admin.campaign_sends import CampaignId
from tidings.api.admin.send_views import AttemptQueued, ReconcileResult
from tidings.api.deps import AdminKeyId, ContainerDep
from tidings.domain.sending import BatchStatus, RecipientState

router = APIRouter(prefix="/campaigns", tags=["admin: campaigns"])
BatchId = Annotated[int, Path(ge=1, le=2**62)]
Note = Annotated[
    str,
    Field(
        min_length=1,
        max_length=500,
        pattern=r"\S",
        description="Why: what you found at the provider. Kept in the audit.",
    ),
]


class ReconcileRequest(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    outcome: Literal["submitted", "failed"] = Field(
        alias="as",
        description="`submitted`: the provider had the batch; `failed`: it did not.",
    )
    note: Note


class ResendRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: Literal["uncertain", "failed"] = Field(
        description="Send again to the uncertain recipients, or to the transiently failed ones."
    )
    note: Note


@router.post(
    "/{campaign_id}/retry",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Retry a failed send (its failed batches and transiently failed recipients)",
)
async def retry_campaign(
    container: ContainerDep, key_id: AdminKeyId, campaign_id: CampaignId
) -> AttemptQueued:
    started = await container.retries.retry(campaign_id, actor=f"admin:{key_id}")
    return AttemptQueued.of(started)


@router.post(
    "/{campaign_id}/batches/{batch_id}/reconcile",
    summary="Record what the provider did with a batch whose outcome is unknown",
)
async def reconcile_batch(
    container: ContainerDep,
    key_id: AdminKeyId,
    campaign_id: CampaignId,
    batch_id: BatchId,
    body: ReconcileRequest,
) -> ReconcileResult:
    done = await container.reconciler.reconcile(
        campaign_id,
        batch_id,
        BatchStatus(body.outcome),
        note=body.note,
        actor=f"admin:{key_id}",
    )
    return ReconcileResult.of(done)


@router.post(
    "/{campaign_id}/resend",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Send again to the uncertain or transiently failed recipients (audited)",
)
async def resend_campaign(
    container: ContainerDep, key_id: AdminKeyId, campaign_id: CampaignId, body: ResendRequest
) -> AttemptQueued:
    started = await container.retries.resend(
        campaign_id, RecipientState(body.state), note=body.note, actor=f"admin:{key_id}"
    )
    return AttemptQueued.of(started)
