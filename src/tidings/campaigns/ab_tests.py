"""A/B tests (SPEC ENG-8): hold the remainder while the test share is sent, decide at the end
of the wait (a queue job) or when the operator picks, release the remainder once, and show
the figures. The assignment itself happens in preparation (one snapshot, SND-3); this module
only reads the batches it produced, whose segments say which variant each one carries.

Deciding is idempotent: the decision is one conditional write (`winner IS NULL`), made in the
same transaction that queues the remainder's batch jobs, whose idempotency keys make a second
release (a retried job, an operator's pick racing the job) queue nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.campaigns.context import SendingContext
from tidings.campaigns.jobs.payloads import DecideAbTest, SendBatch
from tidings.campaigns.statistics import CampaignStatistics
from tidings.campaigns.verification import ab_accounting
from tidings.domain.ab_tests import (
    Decision,
    VariantFigures,
    decide,
    letter,
    parse_variant,
    split_segment,
)
from tidings.domain.errors import Conflict, NotFound
from tidings.domain.jobs import Defer
from tidings.domain.sending import CampaignStatus
from tidings.queue.job import Job
from tidings.storage import ab_tests as ab_queries
from tidings.storage import campaigns as campaign_queries
from tidings.storage.ab_tests import AbTestRow
from tidings.storage.sending import campaign_sends as send_queries
from tidings.storage.sending import recipient_outcomes

log = structlog.get_logger("tidings.campaigns")
AUTOMATIC, OPERATOR = "automatic", "operator"
# The decision waits this long again while a test batch is still being sent.
TEST_BATCHES_WAIT_SECONDS = 1.0
OPEN_STATES = (
    CampaignStatus.SCHEDULED,
    CampaignStatus.PENDING,
    CampaignStatus.SUBMITTING,
    CampaignStatus.PAUSED,
)


async def variant_figures(
    conn: AsyncConnection, campaign_id: int, variant_count: int
) -> list[VariantFigures]:
    """Per variant: messages handed over, and people's unique opens and clicks."""
    counted = await ab_accounting(conn, campaign_id)
    people: dict[int, dict[str, int]] = {}
    for segment, kinds in (await ab_queries.people_per_segment(conn, campaign_id)).items():
        _tier, variant = split_segment(segment)
        if variant is not None:
            found = people.setdefault(variant, {})
            for kind, count in kinds.items():
                found[kind] = found.get(kind, 0) + count
    return [
        VariantFigures(
            n,
            counted.sent.get(n, 0),
            people.get(n, {}).get("open", 0),
            people.get(n, {}).get("click", 0),
        )
        for n in range(1, variant_count + 1)
    ]


def per_variant(by_segment: Mapping[str, int]) -> dict[int, int]:
    """A per-segment count (delivered, say) summed per variant; the remainder left out."""
    found: dict[int, int] = {}
    for segment, count in by_segment.items():
        _tier, variant = split_segment(segment)
        if variant is not None:
            found[variant] = found.get(variant, 0) + count
    return found


def decision_json(
    decision: Decision,
    ab: AbTestRow,
    default: str | None,
    delivered: Mapping[int, int] | None = None,
) -> dict[str, Any]:
    """What is recorded with the decision, and shown: the rule and each variant's figures
    (`delivered` as reported by then, None when not known here)."""
    return {
        "metric": decision.metric.value,
        "confidence": decision.confidence,
        "significant": decision.significant,
        "rule": "two-proportion z-test of each variant against A, Bonferroni-corrected",
        "variants": [
            {
                "variant": letter(result.variant),
                "value": ab.test.value(result.variant, default),
                "sent": result.sent,
                "delivered": None if delivered is None else delivered.get(result.variant, 0),
                "human_unique_opens": result.opens,
                "human_unique_clicks": result.clicks,
                "rate": result.rate,
                "z": None if result.z is None else round(result.z, 4),
                "p": None if result.p is None else round(result.p, 6),
            }
            for result in decision.results
        ],
    }


async def hold_remainder(
    context: SendingContext, conn: AsyncConnection, campaign_id: int, attempt: int, ab: AbTestRow
) -> list[int]:
    """At dispatch, before the decision: the test batches still owing work, and the decision
    job queued for the end of the wait (counted from the first dispatch, kept across
    resumes). The remainder's batches stay `pending`, held."""
    started = await ab_queries.mark_started(conn, campaign_id, context.now())
    step = DecideAbTest(campaign_id, attempt)
    await context.queue.enqueue(
        conn,
        step.kind,
        step.idempotency_key,
        step.to_payload(),
        run_at=started + ab.test.wait,
        revive=True,
    )
    batches = await ab_queries.unfinished_batches(conn, campaign_id)
    return [batch_id for batch_id, segment in batches if split_segment(segment)[1] is not None]


class AbTests:
    def __init__(self, context: SendingContext, *, confidence: float) -> None:
        self._ctx = context
        self._confidence = confidence

    async def decide(self, job: Job) -> None:
        """The `decide_ab_test` job: choose by the figures (unless already chosen) and release
        the remainder. A test batch still being sent makes it wait a moment more; while the
        send is paused, it ends instead of polling: resuming dispatches the send again, which
        makes this job due again (`hold_remainder`)."""
        step = DecideAbTest.from_job(job)
        async with self._ctx.queue.fenced(job) as conn:
            send = await send_queries.get(conn, step.campaign_id)
            ab = await ab_queries.get(conn, step.campaign_id)
            if send is None or send.attempt != step.attempt or ab is None:
                return
            status = await send_queries.status(conn, step.campaign_id)
            if status not in OPEN_STATES:
                return
            if not ab.decided:
                batches = await ab_queries.unfinished_batches(conn, step.campaign_id)
                if any(split_segment(segment)[1] is not None for _, segment in batches):
                    if status == CampaignStatus.PAUSED:
                        log.info("campaign.ab_decision_waits_for_resume")
                        return
                    raise Defer(
                        "the test share is still being sent", seconds=TEST_BATCHES_WAIT_SECONDS
                    )
                await self._record(conn, ab, AUTOMATIC, None)
            await self._release(conn, step.campaign_id, step.attempt)

    async def pick(self, campaign_id: int, variant: str) -> AbTestRow:
        """The operator's choice, before the wait is over: recorded with the figures so far,
        and the remainder released at once if the send is under way."""
        async with self._ctx.db.write() as conn:
            ab = await ab_queries.get(conn, campaign_id)
            if ab is None:
                if await campaign_queries.get(conn, campaign_id) is None:
                    raise NotFound(f"no campaign with id {campaign_id}")
                raise NotFound(f"campaign {campaign_id} has no A/B test", field="campaign_id")
            chosen = parse_variant(variant, ab.test.variant_count)
            if ab.decided:
                assert ab.winner is not None
                raise Conflict(
                    f"campaign {campaign_id}'s A/B test is decided already: variant "
                    f"{letter(ab.winner)} ({ab.decided_by}, {ab.decided_at:%Y-%m-%d %H:%M} UTC)"
                )
            status = await send_queries.status(conn, campaign_id)
            if status not in (*OPEN_STATES, CampaignStatus.DRAFT):
                raise Conflict(f"campaign {campaign_id} is {status}: its remainder is settled")
            await self._record(conn, ab, OPERATOR, chosen)
            send = await send_queries.get(conn, campaign_id)
            if status == CampaignStatus.SUBMITTING and send is not None:
                await self._release(conn, campaign_id, send.attempt)
            found = await ab_queries.get(conn, campaign_id)
        assert found is not None
        return found

    async def _record(
        self, conn: AsyncConnection, ab: AbTestRow, decided_by: str, chosen: int | None
    ) -> None:
        row = await campaign_queries.get(conn, ab.campaign_id)
        assert row is not None
        default = getattr(row, ab.test.field.value)
        figures = await variant_figures(conn, ab.campaign_id, ab.test.variant_count)
        decision = decide(figures, ab.test.metric, self._confidence)
        outcomes = await recipient_outcomes.campaign_counts(conn, ab.campaign_id)
        delivered = per_variant({name: counts["delivered"] for name, counts in outcomes.items()})
        recorded = decision_json(decision, ab, default, delivered)
        winner = decision.winner if chosen is None else chosen
        recorded["suggested"] = letter(decision.winner)
        if await ab_queries.record_decision(
            conn,
            ab.campaign_id,
            winner=winner,
            decided_by=decided_by,
            figures=recorded,
            now=self._ctx.now(),
        ):
            log.info(
                "campaign.ab_decided",
                winner=letter(winner),
                decided_by=decided_by,
                significant=decision.significant,
            )

    async def _release(self, conn: AsyncConnection, campaign_id: int, attempt: int) -> int:
        """Queue the remainder's batch jobs; a second call queues nothing (same keys)."""
        released = 0
        for batch_id, segment in await ab_queries.unfinished_batches(conn, campaign_id):
            if split_segment(segment)[1] is None:
                step = SendBatch(campaign_id, batch_id, attempt)
                _job, created = await self._ctx.queue.enqueue(
                    conn, step.kind, step.idempotency_key, step.to_payload()
                )
                released += int(created)
        if released:
            log.info("campaign.ab_remainder_released", campaign_id=campaign_id, batches=released)
        return released

    async def summary(
        self, campaign_id: int, statistics: CampaignStatistics | None = None
    ) -> dict[str, Any] | None:
        """The test, its state and figures (recorded once decided, live before, with what
        was delivered when the caller has the campaign's `statistics` at hand), and the
        accounting: variants + remainder = recipients. None without a test."""
        async with self._ctx.db.read() as conn:
            ab = await ab_queries.get(conn, campaign_id)
            if ab is None:
                return None
            row = await campaign_queries.get(conn, campaign_id)
            assert row is not None
            counted = await ab_accounting(conn, campaign_id)
            figures = ab.figures
            if figures is None:
                live = await variant_figures(conn, campaign_id, ab.test.variant_count)
                decision = decide(live, ab.test.metric, self._confidence)
                shown = None
                if statistics is not None:
                    shown = per_variant(
                        {name: counts.delivered for name, counts in statistics.segments.items()}
                    )
                figures = decision_json(decision, ab, None, shown)
        default = getattr(row, ab.test.field.value)
        for shown in figures["variants"]:
            number = parse_variant(shown["variant"], ab.test.variant_count)
            shown["value"] = ab.test.value(number, default)
        decide_at = None if ab.test_started_at is None else ab.test_started_at + ab.test.wait
        return {
            "field": ab.test.field.value,
            "metric": ab.test.metric.value,
            "test_share": ab.test.test_share,
            "wait_seconds": int(ab.test.wait.total_seconds()),
            "confidence": figures.get("confidence", self._confidence),
            "state": _state(ab),
            "test_started_at": _iso(ab.test_started_at),
            "decides_at": _iso(decide_at),
            "decided_at": _iso(ab.decided_at),
            "decided_by": ab.decided_by,
            "winner": None if ab.winner is None else letter(ab.winner),
            "significant": figures.get("significant") if ab.decided else None,
            "figures": figures,
            "accounting": {
                "variants": {letter(n): count for n, count in sorted(counted.variants.items())},
                "remainder": counted.remainder,
                "total": counted.total,
            },
        }


def _state(ab: AbTestRow) -> str:
    if ab.decided:
        return "decided"
    return "testing" if ab.test_started_at is not None else "not started"


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()
