"""A/B tests (issue 37 item 1, ENG-8): a campaign's test (the varied field, its alternatives,
the share tested, the wait, the metric) and, once made, the decision with its figures.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from tidings.storage.dialect import UTCDateTime

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "campaign_ab_tests",
        sa.Column(
            "campaign_id",
            BigId,
            sa.ForeignKey("campaigns.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("field", sa.String(16), nullable=False),
        sa.Column("alternatives", Json, nullable=False, comment="variants 2.., in order"),
        sa.Column("test_share", sa.Integer(), nullable=False, comment="percent of the audience"),
        sa.Column("wait_seconds", sa.Integer(), nullable=False),
        sa.Column("metric", sa.String(8), nullable=False),
        sa.Column(
            "test_started_at", UTCDateTime(), nullable=True, comment="its batches dispatched"
        ),
        sa.Column("decided_at", UTCDateTime(), nullable=True),
        sa.Column("winner", sa.Integer(), nullable=True),
        sa.Column("decided_by", sa.String(16), nullable=True),
        sa.Column("figures", Json, nullable=True, comment="per variant, and the rule applied"),
        sa.CheckConstraint("field IN ('subject', 'preheader', 'sender_name')", name="field"),
        sa.CheckConstraint("metric IN ('clicks', 'opens')", name="metric"),
        sa.CheckConstraint("test_share BETWEEN 1 AND 90", name="test_share"),
        sa.CheckConstraint("wait_seconds > 0", name="wait_seconds"),
        sa.CheckConstraint("decided_by IN ('automatic', 'operator')", name="decided_by"),
        sa.CheckConstraint(
            "(decided_at IS NULL) = (winner IS NULL) AND (winner IS NULL) = (decided_by IS NULL)",
            name="decision_whole",
        ),
    )


def downgrade() -> None:
    op.drop_table("campaign_ab_tests")
