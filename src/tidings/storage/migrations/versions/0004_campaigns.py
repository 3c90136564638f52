"""campaigns

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.storage.dialect import UTCDateTime

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "campaigns",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "newsletter_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("subject", sa.String(length=998), nullable=False),
        sa.Column("preheader", sa.String(length=500), server_default="", nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("body_format", sa.String(length=16), nullable=False),
        sa.Column("audience_filter", sa.String(length=500), server_default="", nullable=False),
        sa.Column("sender_name", sa.String(length=200), nullable=True),
        sa.Column("reply_to", sa.String(length=320), nullable=True),
        sa.Column("scheduled_at", UTCDateTime(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.CheckConstraint(
            "body_format IN ('markdown', 'html')", name=op.f("ck_campaigns_body_format")
        ),
        sa.CheckConstraint(
            "status IN ('draft', 'scheduled', 'pending', 'submitting', 'submitted', 'failed', "
            "'cancelled')",
            name=op.f("ck_campaigns_status"),
        ),
        sa.ForeignKeyConstraint(
            ["newsletter_id"],
            ["newsletters.id"],
            name=op.f("fk_campaigns_newsletter_id_newsletters"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_campaigns")),
    )
    with op.batch_alter_table("campaigns", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_campaigns_newsletter_id_id"), ["newsletter_id", "id"], unique=False
        )


def downgrade() -> None:

    with op.batch_alter_table("campaigns", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_campaigns_newsletter_id_id"))

    op.drop_table("campaigns")
