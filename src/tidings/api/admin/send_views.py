"""The bodies the admin API answers about a campaign's send (its status, its recipients, the
attempt a repair started), which the CLI prints with `--json` too: pydantic only, without
FastAPI, so that the CLI's commands load them without the web stack."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from tidings.campaigns.reconcile import Reconciled
from tidings.campaigns.retry import AttemptStarted
from tidings.campaigns.send_status import CampaignRecipient
from tidings.campaigns.statistics import CampaignStatistics, Counts
from tidings.domain.provider_health import ProviderProblem
from tidings.domain.send_status import SendingStatus
from tidings.engagement.results import CampaignEngagement, Reach

# The `ab` object's shape, for the stats answer's schema (ENG-8).
AB_SHAPE = (
    "The A/B test, null without one: its field, metric, test_share, wait_seconds and "
    "confidence; state (`not started`, `testing`, `decided`); decides_at; once decided, "
    "winner (A-D), decided_by (`automatic` or `operator`), decided_at and significant (false: "
    "no variant cleared the confidence and A, the default, won); figures (per variant: value, "
    "sent, delivered, human_unique_opens, human_unique_clicks, rate, z and p against A; "
    "recorded at the decision, live before it); accounting (recipients per variant and in "
    "the remainder)."
)


class RecipientCounts(BaseModel):
    sent: int
    failed: int
    excluded: int
    uncertain: int
    cancelled: int = Field(description="Never handed over: the send was cancelled first (SND-23).")


class ProviderProblemPublic(BaseModel):
    provider: str = Field(description="`smtp`, `mailgun`, …")
    endpoint: str | None = Field(description="host:port of the relay, when known.")
    error: str = Field(
        description="What failed: the error named (connection refused, authentication "
        "refused, certificate not trusted, relaying denied, …) with reply codes, never reply "
        "text."
    )
    paused: bool = Field(
        default=False,
        description="The provider refused the sender (relaying denied, a login, key or "
        "certificate refused): the send paused itself, nobody failed, and it waits for the "
        "settings to be fixed and the send resumed. False: retried by itself.",
    )
    attempts: int = Field(description="Tries of the waiting batch job so far.")
    max_attempts: int
    next_try: datetime | None = Field(description="When the job is tried again.")
    summary: str = Field(description="One line for an operator, as the UI shows it.")

    @classmethod
    def of(cls, problem: ProviderProblem) -> ProviderProblemPublic:
        return cls(
            provider=problem.provider,
            endpoint=problem.endpoint,
            error=problem.error,
            paused=problem.paused,
            attempts=problem.attempts,
            max_attempts=problem.max_attempts,
            next_try=problem.next_try,
            summary=problem.summary(),
        )


class AutoPausePublic(BaseModel):
    paused_at: datetime
    reason: str = Field(description="The rate that passed its threshold, with the figures.")
    summary: str = Field(description="One line for an operator, as the UI shows it.")


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
    provider_problem: ProviderProblemPublic | None = Field(
        description="A send waiting on its provider (unreachable: the attempts and the next "
        "try), or paused because the provider refused the sender (SND-26). Null otherwise."
    )
    auto_pause: AutoPausePublic | None = Field(
        default=None,
        description="A send that paused itself on its hard-bounce or complaint rate (SND-24): "
        "when and why. Null otherwise, and again once resumed or cancelled.",
    )

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
                cancelled=totals.cancelled,
            ),
            provider_problem=(
                ProviderProblemPublic.of(found.provider_problem) if found.provider_problem else None
            ),
            auto_pause=(
                AutoPausePublic(
                    paused_at=found.auto_pause.at,
                    reason=found.auto_pause.reason,
                    summary=found.auto_pause.summary(),
                )
                if found.auto_pause
                else None
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


class AttemptQueued(BaseModel):
    campaign_id: int
    attempt: int
    job_id: int
    batches_requeued: int
    recipients_requeued: int

    @classmethod
    def of(cls, started: AttemptStarted) -> AttemptQueued:
        return cls(
            campaign_id=started.campaign_id,
            attempt=started.attempt,
            job_id=started.job_id,
            batches_requeued=started.batches,
            recipients_requeued=started.recipients,
        )


class ReconcileResult(BaseModel):
    campaign_id: int
    batch_id: int
    outcome: str
    recipients: int = Field(description="Recipients whose state the decision settled.")
    campaign_status: str
    next_step: str
    attempt: int | None = Field(description="The attempt the decision started, if any.")

    @classmethod
    def of(cls, done: Reconciled) -> ReconcileResult:
        return cls(
            campaign_id=done.campaign_id,
            batch_id=done.batch_id,
            outcome=done.outcome.value,
            recipients=done.recipients,
            campaign_status=done.campaign_status.value,
            next_step=done.next_step,
            attempt=done.attempt,
        )


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


ENGAGEMENT_SHAPE = (
    "Opens and clicks (ENG-5), read from the counters. `tracking`: the newsletter's mode; "
    "with `off` and nothing counted, that is all (no zeros for what was never measured). "
    "Otherwise `opens` and `clicks` ({human_unique, human_total, machine_total}: people's "
    "unique and all hits, machines' (privacy proxies, scanners) apart), `rates` "
    "({denominator: delivered|sent, denominator_count, open_rate, click_through_rate}: "
    "people's unique opens and clicks as shares of delivered, or of sent when the provider "
    "reports no deliveries), `links` ([{url, human_unique, human_total, machine_total}], "
    "one per URL across segments, hidden links and the pixel left out), `segments` "
    "({name: {opens, clicks}}) and `over_time` ([{hour, opens, clicks}]: messages first "
    "opened and clicked by a person in each hour, UTC)."
)


def engagement_reach(found: CampaignStatistics) -> Reach:
    """The rates' denominators from the recipient counts the statistics already read."""
    return Reach(sent=found.total.sent, delivered=found.total.delivered)


# Send again (ENG-7): the campaign's links both ways, as GET /campaigns/{id}/send-again shows.
SEND_AGAIN_SHAPE = (
    "`origin`: the campaign this one was sent again from (null if none), and `resends`: the "
    "campaigns sent again from this one; each with campaign_id, origin_id, audience, "
    "audience_count (frozen at creation), left_out ({reason: count}: not_mailable, "
    "not_tracked, hits_purged, outcome_unknown), left_out_count and created_at."
)


class CampaignStatsPublic(BaseModel):
    campaign_id: int
    total: CountsPublic
    segments: dict[str, CountsPublic] = Field(
        description="By segment (`free`, `paid`...; `excluded`: never handed over)."
    )
    engagement: dict[str, Any] = Field(description=ENGAGEMENT_SHAPE)
    counted_at: datetime | None = Field(
        default=None,
        description="When the workers counted these figures (a campaign of more than "
        "`bulk_email.stored_statistics_above` recipients); null: counted for this answer.",
    )
    ab: dict[str, Any] | None = Field(default=None, description=AB_SHAPE)
    send_again: dict[str, Any] | None = Field(default=None, description=SEND_AGAIN_SHAPE)

    @classmethod
    def of(
        cls,
        found: CampaignStatistics,
        engagement: CampaignEngagement,
        ab: dict[str, Any] | None = None,
        send_again: dict[str, Any] | None = None,
    ) -> CampaignStatsPublic:
        return cls(
            campaign_id=found.campaign_id,
            total=CountsPublic.of(found.total),
            segments={name: CountsPublic.of(counts) for name, counts in found.segments.items()},
            engagement=engagement.as_json(),
            counted_at=found.counted_at,
            ab=ab,
            send_again=send_again,
        )
