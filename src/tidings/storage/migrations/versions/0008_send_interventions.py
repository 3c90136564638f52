"""Send interventions: the audit of retries, reconciles and resends (SPEC SND-13, SND-19).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.storage.dialect import UTCDateTime

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "send_interventions",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("campaign_id", BIG_ID, nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("batch_id", BIG_ID, nullable=True, comment="the batch reconciled"),
        sa.Column(
            "outcome",
            sa.String(length=16),
            nullable=True,
            comment="reconcile: submitted|failed; resend: the state",
        ),
        sa.Column("recipient_count", sa.Integer(), nullable=False, comment="recipients it moved"),
        sa.Column("attempt", sa.Integer(), nullable=True, comment="the attempt it started, if any"),
        sa.Column("note", sa.String(length=500), nullable=True),
        sa.Column(
            "actor",
            sa.String(length=100),
            nullable=False,
            comment="an API key id, or cli:<login>",
        ),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.CheckConstraint(
            "action IN ('retry', 'reconcile', 'resend')",
            name=op.f("ck_send_interventions_action"),
        ),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_send_interventions_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_send_interventions")),
    )
    with op.batch_alter_table("send_interventions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_send_interventions_campaign_id_id"),
            ["campaign_id", "id"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("send_interventions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_send_interventions_campaign_id_id"))
    op.drop_table("send_interventions")
