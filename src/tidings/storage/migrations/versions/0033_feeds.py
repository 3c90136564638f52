"""Feed-to-email: a newsletter's feed and the items its digests took (issue 39 item 4, AUT-2).

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.storage.dialect import UTCDateTime

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _campaign(name: str) -> sa.Column[int]:
    return sa.Column(name, BigId, sa.ForeignKey("campaigns.id", ondelete="SET NULL"), nullable=True)


def upgrade() -> None:
    op.create_table(
        "newsletter_feeds",
        sa.Column(
            "newsletter_id",
            BigId,
            sa.ForeignKey("newsletters.id", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("url", sa.String(2000), nullable=False),
        sa.Column("schedule", sa.String(100), nullable=False),
        sa.Column("mode", sa.String(8), nullable=False),
        sa.Column("followed_at", UTCDateTime(), nullable=False),
        sa.Column("etag", sa.String(500), nullable=True),
        sa.Column("last_modified", sa.String(100), nullable=True),
        sa.Column("next_run_at", UTCDateTime(), nullable=False),
        sa.Column("last_run_at", UTCDateTime(), nullable=True),
        sa.Column("last_success_at", UTCDateTime(), nullable=True),
        sa.Column("last_error", sa.String(500), nullable=True),
        sa.Column("failures", sa.Integer, nullable=False, server_default="0"),
        _campaign("last_campaign_id"),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.CheckConstraint("mode IN ('draft', 'send')", name="mode"),
    )
    op.create_index(op.f("ix_newsletter_feeds_next_run_at"), "newsletter_feeds", ["next_run_at"])
    op.create_table(
        "feed_items",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "newsletter_id",
            BigId,
            sa.ForeignKey("newsletters.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "key_hash",
            sa.String(64),
            nullable=False,
            comment="sha256 of the guid, else the link",
        ),
        sa.Column("item_key", sa.String(2000), nullable=False),
        sa.Column("title", sa.String(500), nullable=False, server_default=""),
        sa.Column("link", sa.String(2000), nullable=True),
        _campaign("campaign_id"),
        sa.Column("recorded_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("newsletter_id", "key_hash"),
    )
    op.create_index(op.f("ix_feed_items_campaign_id"), "feed_items", ["campaign_id"])


def downgrade() -> None:
    op.drop_table("feed_items")
    op.drop_table("newsletter_feeds")
