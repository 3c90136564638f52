"""The send watch: per-campaign counts of hard bounces and complaints for auto-pause
(SND-24), and a shared rate row per recipient domain (SND-25).

Revision ID: 0021
Revises: 0019
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.storage.dialect import UTCDateTime

revision: str = "0021"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "campaign_feedback_counts",
        sa.Column("campaign_id", BIG_ID, nullable=False),
        sa.Column("hard_bounced", sa.Integer(), server_default="0", nullable=False),
        sa.Column("complained", sa.Integer(), server_default="0", nullable=False),
        sa.Column("baseline_sent", sa.Integer(), server_default="0", nullable=False),
        sa.Column("baseline_hard_bounced", sa.Integer(), server_default="0", nullable=False),
        sa.Column("baseline_complained", sa.Integer(), server_default="0", nullable=False),
        sa.Column("auto_paused_at", UTCDateTime(), nullable=True),
        sa.Column(
            "auto_pause_reason",
            sa.String(length=200),
            nullable=True,
            comment="figures only, no address",
        ),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_campaign_feedback_counts_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("campaign_id", name=op.f("pk_campaign_feedback_counts")),
    )
    op.create_table(
        "domain_send_rates",
        sa.Column("domain", sa.String(length=255), nullable=False),
        sa.Column("theoretical_arrival", sa.Double(), nullable=False),
        sa.Column("halvings", sa.Integer(), server_default="0", nullable=False),
        sa.Column("slowed_at", sa.Double(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("domain", name=op.f("pk_domain_send_rates")),
    )


def downgrade() -> None:
    op.drop_table("domain_send_rates")
    op.drop_table("campaign_feedback_counts")
