"""Recipient verification shared by preparation, a resumed send and finalise (SND-7, SND-14):
ownership in both directions, and a frozen batch set (nothing created after `prepared_at`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.sending import VerificationFailed
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
