"""Send again (issue 37 item 2, ENG-7): a campaign made from a sent one's recipients keeps its
link to the origin (who it was for, how many were chosen and left out, and why) and the
audience frozen when it was made.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from tidings.storage.dialect import UTCDateTime

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "campaign_resends",
        sa.Column(
            "campaign_id",
            BigId,
            sa.ForeignKey("campaigns.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column(
            "origin_id",
            BigId,
            sa.ForeignKey("campaigns.id", ondelete="RESTRICT"),
            nullable=False,
        ),
        sa.Column("audience", sa.String(16), nullable=False),
        sa.Column("chosen_count", sa.Integer(), nullable=False, comment="frozen at creation"),
        sa.Column("left_out", Json, nullable=False, comment="{reason: count}"),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.CheckConstraint(
            "audience IN ('not_opened', 'not_clicked', 'not_delivered', 'all')", name="audience"
        ),
        sa.CheckConstraint("campaign_id <> origin_id", name="not_itself"),
    )
    op.create_index(
        "ix_campaign_resends_origin_id", "campaign_resends", ["origin_id"], unique=False
    )
    op.create_table(
        "campaign_frozen_audience",
        sa.Column(
            "campaign_id",
            BigId,
            sa.ForeignKey("campaign_resends.campaign_id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column(
            "subscriber_id",
            BigId,
            sa.ForeignKey("subscribers.id", ondelete="CASCADE"),
            primary_key=True,
        ),
    )
    op.create_index(
        "ix_campaign_frozen_audience_subscriber_id",
        "campaign_frozen_audience",
        ["subscriber_id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_campaign_frozen_audience_subscriber_id", "campaign_frozen_audience")
    op.drop_table("campaign_frozen_audience")
    op.drop_index("ix_campaign_resends_origin_id", "campaign_resends")
    op.drop_table("campaign_resends")
