"""Engagement segments and the sunset policy (issue 37 items 3-4, ENG-7).

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.storage.dialect import UTCDateTime

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
SETTINGS = (
    ("sunset_after_days", "180"),
    ("sunset_min_sends", "5"),
    ("sunset_grace_days", "30"),
)


def _key(name: str, table: str) -> sa.Column[int]:
    return sa.Column(name, BigId, sa.ForeignKey(f"{table}.id", ondelete="CASCADE"), nullable=False)


def upgrade() -> None:
    with op.batch_alter_table("newsletters") as batch:
        batch.add_column(
            sa.Column("sunset_enabled", sa.Boolean(), nullable=False, server_default="0")
        )
        for name, default in SETTINGS:
            batch.add_column(sa.Column(name, sa.Integer, nullable=False, server_default=default))
    op.create_table(
        "sunset_requests",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        _key("subscription_id", "subscriptions"),
        _key("newsletter_id", "newsletters"),
        _key("subscriber_id", "subscribers"),
        sa.Column(
            "period",
            sa.Integer,
            nullable=False,
            comment="days since 1970 // after_days, at asking",
        ),
        sa.Column("asked_at", UTCDateTime(), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("resolved_at", UTCDateTime(), nullable=True),
        sa.UniqueConstraint("subscription_id", "period"),
        sa.CheckConstraint(
            "outcome IN ('kept', 'engaged', 'unsubscribed', 'gone')", name="outcome"
        ),
    )
    op.create_index(
        op.f("ix_sunset_requests_newsletter_id_outcome_asked_at"),
        "sunset_requests",
        ["newsletter_id", "outcome", "asked_at"],
    )
    op.create_index(op.f("ix_sunset_requests_subscriber_id"), "sunset_requests", ["subscriber_id"])


def downgrade() -> None:
    op.drop_table("sunset_requests")
    with op.batch_alter_table("newsletters") as batch:
        for name, _ in reversed(SETTINGS):
            batch.drop_column(name)
        batch.drop_column("sunset_enabled")
