"""Stored campaign outcome counts (issue 36 item 5, SND-27): a large campaign's delivery,
bounce, complaint and unsubscribe counts per segment and its events per hour, counted from the
recipient rows by the workers and read by its page, so the page costs the same for a million
recipients as for a thousand; and the index that lets a campaign's events be read alone.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from tidings.storage.dialect import UTCDateTime

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "campaign_outcome_counts",
        sa.Column(
            "campaign_id",
            BigId,
            sa.ForeignKey("campaigns.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("segments", Json, nullable=False),
        sa.Column("hourly", Json, nullable=False),
        sa.Column("counted_at", UTCDateTime(), nullable=False),
        sa.Column("took_ms", sa.Integer(), nullable=False),
    )
    op.create_index(
        "ix_inbound_events_campaign_id_occurred_at",
        "inbound_events",
        ["campaign_id", "occurred_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_inbound_events_campaign_id_occurred_at", table_name="inbound_events")
    op.drop_table("campaign_outcome_counts")
