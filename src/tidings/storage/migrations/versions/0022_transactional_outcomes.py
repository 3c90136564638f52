"""Transactional mail's outcomes (PRV-6, issue 22): each `send_email` job's Message-ID, with
the delivered / bounced / complained the provider or the mailbox reports about it.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.storage.dialect import UTCDateTime

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "transactional_messages",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("job_id", BIG_ID, nullable=False),
        sa.Column(
            "message_key",
            sa.String(length=255),
            nullable=False,
            comment="the Message-ID's local part",
        ),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("delivered_at", UTCDateTime(), nullable=True),
        sa.Column("bounced_at", UTCDateTime(), nullable=True),
        sa.Column("bounce_kind", sa.String(length=8), nullable=True),
        sa.Column(
            "bounce_code", sa.String(length=32), nullable=True, comment="e.g. 550 or 5.1.1, no text"
        ),
        sa.Column("complained_at", UTCDateTime(), nullable=True),
        sa.CheckConstraint(
            "bounce_kind IN ('hard', 'soft')", name=op.f("ck_transactional_messages_bounce_kind")
        ),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_transactional_messages_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_transactional_messages")),
        sa.UniqueConstraint("job_id", name=op.f("uq_transactional_messages_job_id")),
        sa.UniqueConstraint("message_key", name=op.f("uq_transactional_messages_message_key")),
    )


def downgrade() -> None:
    op.drop_table("transactional_messages")
