"""The campaign job kinds and their typed payloads: jobs carry ids, never message bodies."""

from __future__ import annotations

from dataclasses import asdict, astuple, dataclass, fields
from typing import Any, ClassVar, Self

from tidings.domain.jobs import GiveUp
from tidings.queue.store import Job

SEND_CAMPAIGN = "send_campaign"
SEND_BATCH = "send_batch"
FINALISE_CAMPAIGN = "finalise_campaign"


@dataclass(frozen=True, slots=True)
class CampaignJob:
    """A payload of integer ids; its idempotency key is its kind and ids, so enqueueing the
    same step twice (a retry, two workers finishing together) makes one job."""

    kind: ClassVar[str]

    @property
    def idempotency_key(self) -> str:
        return ":".join([self.kind, *(str(value) for value in astuple(self))])

    def to_payload(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_job(cls, job: Job) -> Self:
        names = [field.name for field in fields(cls)]
        payload = job.payload if isinstance(job.payload, dict) else {}
        found = [payload.get(name) for name in names]
        if len(found) != len(names) or not all(
            isinstance(value, int) and not isinstance(value, bool) for value in found
        ):
            raise GiveUp(f"malformed {job.kind} payload")
        return cls(*found)


@dataclass(frozen=True, slots=True)
class SendCampaign(CampaignJob):
    """Take the status lock, prepare (or reuse the frozen preparation), dispatch batches."""

    campaign_id: int
    attempt: int
    kind: ClassVar[str] = SEND_CAMPAIGN


@dataclass(frozen=True, slots=True)
class SendBatch(CampaignJob):
    """Claim one batch and hand its recipients to the provider (any worker may take it)."""

    campaign_id: int
    batch_id: int
    attempt: int
    kind: ClassVar[str] = SEND_BATCH


@dataclass(frozen=True, slots=True)
class FinaliseCampaign(CampaignJob):
    """Re-read every batch, verify, and close the campaign (SND-14)."""

    campaign_id: int
    attempt: int
    kind: ClassVar[str] = FINALISE_CAMPAIGN
