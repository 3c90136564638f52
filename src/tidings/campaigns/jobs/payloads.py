"""The campaign job kinds and their typed payloads: jobs carry ids, never message bodies."""

from __future__ import annotations

from dataclasses import astuple, dataclass
from typing import ClassVar

from tidings.queue.job import JobPayload

SEND_CAMPAIGN = "send_campaign"
SEND_BATCH = "send_batch"
FINALISE_CAMPAIGN = "finalise_campaign"
DECIDE_AB_TEST = "decide_ab_test"


@dataclass(frozen=True, slots=True)
class CampaignJob(JobPayload):
    """Integer ids only; the idempotency key is the kind and the ids, so enqueueing the same
    step twice (a retry, two workers finishing together) makes one job."""

    @property
    def idempotency_key(self) -> str:
        return ":".join([self.kind, *(str(value) for value in astuple(self))])


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


@dataclass(frozen=True, slots=True)
class DecideAbTest(CampaignJob):
    """At the end of an A/B test's wait: choose the winner and release the remainder (ENG-8)."""

    campaign_id: int
    attempt: int
    kind: ClassVar[str] = DECIDE_AB_TEST


SEND_KINDS = (SEND_CAMPAIGN, SEND_BATCH, FINALISE_CAMPAIGN, DECIDE_AB_TEST)


def live_key_patterns(campaign_id: int, attempt: int) -> list[str]:
    """The idempotency keys of every job one attempt of a send can have (`%`: any batch id):
    while one of them is pending or running, the send is in somebody's hands."""
    return [
        SendCampaign(campaign_id, attempt).idempotency_key,
        FinaliseCampaign(campaign_id, attempt).idempotency_key,
        DecideAbTest(campaign_id, attempt).idempotency_key,  # an A/B test's wait
        f"{SEND_BATCH}:{campaign_id}:%:{attempt}",
    ]
