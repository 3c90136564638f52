"""Campaign sending: send state, candidates, batches and recipients (SPEC §5.2-5.5).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.storage.dialect import UTCDateTime

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "campaign_candidates",
        sa.Column(
            "campaign_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=False,
            nullable=False,
        ),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column(
            "subscriber_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("segment", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("campaign_id", "position", name=op.f("pk_campaign_candidates")),
        # Transient and rebuilt after a crash, so PostgreSQL need not write it to the WAL.
        prefixes=["UNLOGGED"] if op.get_bind().dialect.name == "postgresql" else [],
    )
    op.create_table(
        "campaign_batches",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "campaign_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("page", sa.Integer(), nullable=False, comment="the page of the candidate list"),
        sa.Column("segment", sa.String(length=16), nullable=False),
        sa.Column("sending_domain", sa.String(length=255), nullable=False),
        sa.Column("first_position", sa.Integer(), nullable=False),
        sa.Column("last_position", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("recipient_count", sa.Integer(), nullable=False),
        sa.Column("submitted_count", sa.Integer(), nullable=True),
        sa.Column("submission_excluded_count", sa.Integer(), nullable=True),
        sa.Column("failed_count", sa.Integer(), nullable=True),
        sa.Column("uncertain_count", sa.Integer(), nullable=True),
        sa.Column("provider_message_id", sa.String(length=255), nullable=True),
        sa.Column("claim_token", sa.String(length=32), nullable=True),
        sa.Column("claimed_at", UTCDateTime(), nullable=True),
        sa.Column(
            "claimed_by", sa.String(length=100), nullable=True, comment="host:pid of the worker"
        ),
        sa.Column(
            "handed_over_at",
            UTCDateTime(),
            nullable=True,
            comment="a batch call may have reached the provider from here on",
        ),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.CheckConstraint(
            "status <> 'submitting' OR claim_token IS NOT NULL",
            name=op.f("ck_campaign_batches_submitting_has_claim"),
        ),
        sa.CheckConstraint(
            "status IN ('pending', 'submitting', 'submitted', 'failed')",
            name=op.f("ck_campaign_batches_status"),
        ),
        sa.CheckConstraint(
            "recipient_count >= 0", name=op.f("ck_campaign_batches_recipient_count")
        ),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_campaign_batches_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_campaign_batches")),
        sa.UniqueConstraint(
            "campaign_id", "page", name=op.f("uq_campaign_batches_campaign_id_page")
        ),
    )
    with op.batch_alter_table("campaign_batches", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_campaign_batches_campaign_id_status"),
            ["campaign_id", "status"],
            unique=False,
        )

    op.create_table(
        "campaign_sends",
        sa.Column(
            "campaign_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("attempt", sa.Integer(), server_default="1", nullable=False),
        sa.Column("attempt_started_at", UTCDateTime(), nullable=False),
        sa.Column("preflight_email_count", sa.Integer(), nullable=False),
        sa.Column("lock_token", sa.String(length=32), nullable=True),
        sa.Column("candidate_count", sa.Integer(), nullable=True),
        sa.Column("preparation_excluded_count", sa.Integer(), nullable=True),
        sa.Column("prepared_at", UTCDateTime(), nullable=True),
        sa.Column("email_count", sa.Integer(), nullable=True, comment="verified submitted total"),
        sa.Column("excluded_count", sa.Integer(), nullable=True),
        sa.Column("failed_count", sa.Integer(), nullable=True),
        sa.Column("uncertain_count", sa.Integer(), nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("failed_during", sa.String(length=16), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column(
            "error", sa.Text(), nullable=True, comment="the admin-facing message; no personal data"
        ),
        sa.Column("retryable", sa.Boolean(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.CheckConstraint(
            "failed_during IN ('preparing', 'submitting')",
            name=op.f("ck_campaign_sends_failed_during"),
        ),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_campaign_sends_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("campaign_id", name=op.f("pk_campaign_sends")),
    )
    op.create_table(
        "campaign_recipients",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "campaign_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("batch_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column(
            "subscriber_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True
        ),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column(
            "reason", sa.String(length=64), nullable=True, comment="a code, never provider text"
        ),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.CheckConstraint(
            "batch_id IS NOT NULL OR state = 'excluded'",
            name=op.f("ck_campaign_recipients_unbatched_is_excluded"),
        ),
        sa.CheckConstraint(
            "state IN ('pending', 'sending', 'sent', 'failed', 'excluded', 'uncertain')",
            name=op.f("ck_campaign_recipients_state"),
        ),
        sa.ForeignKeyConstraint(
            ["batch_id"],
            ["campaign_batches.id"],
            name=op.f("fk_campaign_recipients_batch_id_campaign_batches"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaigns.id"],
            name=op.f("fk_campaign_recipients_campaign_id_campaigns"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["subscriber_id"],
            ["subscribers.id"],
            name=op.f("fk_campaign_recipients_subscriber_id_subscribers"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_campaign_recipients")),
        sa.UniqueConstraint(
            "campaign_id",
            "subscriber_id",
            name=op.f("uq_campaign_recipients_campaign_id_subscriber_id"),
        ),
    )
    with op.batch_alter_table("campaign_recipients", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_campaign_recipients_batch_id_state"), ["batch_id", "state"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_campaign_recipients_campaign_id_state"),
            ["campaign_id", "state"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_campaign_recipients_subscriber_id"), ["subscriber_id"], unique=False
        )

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_claim_token"), ["claim_token"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_claim_token"))

    with op.batch_alter_table("campaign_recipients", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_campaign_recipients_subscriber_id"))
        batch_op.drop_index(batch_op.f("ix_campaign_recipients_campaign_id_state"))
        batch_op.drop_index(batch_op.f("ix_campaign_recipients_batch_id_state"))

    op.drop_table("campaign_recipients")
    op.drop_table("campaign_sends")
    with op.batch_alter_table("campaign_batches", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_campaign_batches_campaign_id_status"))

    op.drop_table("campaign_batches")
    op.drop_table("campaign_candidates")
