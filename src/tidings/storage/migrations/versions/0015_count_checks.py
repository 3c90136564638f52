"""Counts kept within the recipients they count (newsletter-backend §4.2, SND-14): a batch's
settled counts never exceed its `recipient_count`, a send's totals never exceed its
candidates, so no code path can write an impossible total.

Revision ID: 0015
Revises: 0013
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH_COUNTS = (
    "submitted_count >= 0 AND submission_excluded_count >= 0 AND failed_count >= 0"
    " AND uncertain_count >= 0"
    " AND COALESCE(submitted_count, 0) + COALESCE(submission_excluded_count, 0)"
    " + COALESCE(failed_count, 0) + COALESCE(uncertain_count, 0) <= recipient_count"
)
SEND_COUNTS = (
    "email_count >= 0 AND excluded_count >= 0 AND failed_count >= 0 AND uncertain_count >= 0"
    " AND (candidate_count IS NULL OR COALESCE(email_count, 0) + COALESCE(excluded_count, 0)"
    " + COALESCE(failed_count, 0) + COALESCE(uncertain_count, 0) <= candidate_count)"
)


def upgrade() -> None:
    with op.batch_alter_table("campaign_batches") as batch:
        batch.create_check_constraint(
            op.f("ck_campaign_batches_counts_within_recipients"), BATCH_COUNTS
        )
    with op.batch_alter_table("campaign_sends") as batch:
        batch.create_check_constraint(
            op.f("ck_campaign_sends_counts_within_candidates"), SEND_COUNTS
        )


def downgrade() -> None:
    with op.batch_alter_table("campaign_sends") as batch:
        batch.drop_constraint(op.f("ck_campaign_sends_counts_within_candidates"), type_="check")
    with op.batch_alter_table("campaign_batches") as batch:
        batch.drop_constraint(op.f("ck_campaign_batches_counts_within_recipients"), type_="check")
