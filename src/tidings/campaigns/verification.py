"""Recipient verification shared by preparation, a resumed send and finalise (SND-7, SND-14):
ownership in both directions, a frozen batch set (nothing created after `prepared_at`), and an
A/B test's accounting (ENG-8: variants + remainder = candidates - exclusions)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.ab_tests import letter, split_segment
from tidings.domain.sending import VerificationFailed, check_count
from tidings.storage import ab_tests as ab_queries
from tidings.storage.sending import batches as batch_queries
from tidings.storage.sending.batches import BatchRow


async def check_ownership(conn: AsyncConnection, campaign_id: int) -> None:
    """No recipient row of this campaign in another campaign's batch, and none of another's
    in ours — checked before any count, and reported in both directions."""
    ours_elsewhere, theirs_here = await batch_queries.cross_campaign_rows(conn, campaign_id)
    if ours_elsewhere or theirs_here:
        raise VerificationFailed(
            "cross_email_recipient",
            rows_in_other_batches=ours_elsewhere,
            foreign_rows=theirs_here,
        )


def check_frozen(batches: Sequence[BatchRow], prepared_at: datetime) -> None:
    """Once `prepared_at` is saved no batch may be created (SND-8). Compared to the second,
    the precision both timestamps are promised at: a batch written within the same second
    passes, so this backs up the frozen preparation path rather than proving it."""
    limit = prepared_at.replace(microsecond=0)
    late = sorted(b.id for b in batches if b.created_at.replace(microsecond=0) > limit)
    if late:
        raise VerificationFailed(
            "batch_created_after_preparation", batch_id=late[0], late_batch_ids=late
        )


@dataclass(frozen=True, slots=True)
class Accounting:
    """An A/B test's recipients per variant and in the remainder, from the frozen batches,
    and what each variant's batches handed over."""

    variants: dict[int, int]
    remainder: int
    sent: dict[int, int]

    @property
    def total(self) -> int:
        return sum(self.variants.values()) + self.remainder


async def ab_accounting(conn: AsyncConnection, campaign_id: int) -> Accounting:
    variants: dict[int, int] = {}
    sent: dict[int, int] = {}
    remainder = 0
    per_segment = await ab_queries.sent_per_segment(conn, campaign_id)
    for segment, (recipients, handed) in per_segment.items():
        _tier, variant = split_segment(segment)
        if variant is None:
            remainder += recipients
        else:
            variants[variant] = variants.get(variant, 0) + recipients
            sent[variant] = sent.get(variant, 0) + handed
    return Accounting(variants, remainder, sent)


async def check_ab_accounting(
    conn: AsyncConnection, campaign_id: int, candidate_count: int | None, excluded: int
) -> Accounting | None:
    """ENG-8, for a campaign with an A/B test: every batch is a variant the test has or the
    remainder, and variants + remainder = candidates - exclusions (each recipient once: a
    recipient row is unique per campaign and subscriber, SND-3). None without a test."""
    ab = await ab_queries.get(conn, campaign_id)
    if ab is None:
        return None
    counted = await ab_accounting(conn, campaign_id)
    unknown = sorted(set(counted.variants) - set(range(1, ab.test.variant_count + 1)))
    if unknown:
        raise VerificationFailed("ab_unknown_variant", variants=unknown)
    check_count(
        "ab_variant_totals",
        expected=None if candidate_count is None else candidate_count - excluded,
        actual=counted.total,
        remainder=counted.remainder,
        **{f"variant_{letter(n)}": count for n, count in sorted(counted.variants.items())},
    )
    return counted
