"""Hearing back (PRV-6, AUD-13, SND-27): received events, per-address bounce records, the
person's history, per-recipient outcomes, and the `soft_bounce` suppression reason.

Revision ID: 0016
Revises: 0013
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from tidings.storage.dialect import UTCDateTime

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
OLD_REASONS = "reason IN ('hard_bounce', 'complaint', 'admin', 'unsubscribe_all')"
NEW_REASONS = "reason IN ('hard_bounce', 'soft_bounce', 'complaint', 'admin', 'unsubscribe_all')"
OUTCOME_COLUMNS = (
    "unsubscribed_at",
    "complained_at",
    "bounce_code",
    "bounce_kind",
    "bounced_at",
    "delivered_at",
)


def upgrade() -> None:
    op.create_table(
        "inbound_events",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column(
            "source", sa.String(length=32), nullable=False, comment="mailgun, ses, api or smtp"
        ),
        sa.Column(
            "event_key", sa.String(length=255), nullable=False, comment="the provider's event id"
        ),
        sa.Column(
            "token", sa.String(length=255), nullable=True, comment="the signature token, seen once"
        ),
        sa.Column("kind", sa.String(length=16), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("email_hash", sa.String(length=64), nullable=True),
        sa.Column("campaign_id", BIG_ID, nullable=True),
        sa.Column("recipient_id", BIG_ID, nullable=True),
        sa.Column("occurred_at", UTCDateTime(), nullable=True),
        sa.Column("code", sa.String(length=32), nullable=True),
        sa.Column(
            "diagnostic", sa.Text(), nullable=True, comment="stored for the operator, never logged"
        ),
        sa.Column("payload", sa.Text(), nullable=True, comment="the raw body of an unparsed event"),
        sa.Column("received_at", UTCDateTime(), nullable=False),
        sa.CheckConstraint(
            "status IN ('applied', 'unmatched', 'unparsed', 'ignored')",
            name=op.f("ck_inbound_events_status"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_inbound_events")),
        sa.UniqueConstraint("source", "event_key", name=op.f("uq_inbound_events_source_event_key")),
        sa.UniqueConstraint("source", "token", name=op.f("uq_inbound_events_source_token")),
    )
    op.create_index(op.f("ix_inbound_events_received_at"), "inbound_events", ["received_at"])
    op.create_index(op.f("ix_inbound_events_email_hash"), "inbound_events", ["email_hash"])
    op.create_index(op.f("ix_inbound_events_status_id"), "inbound_events", ["status", "id"])
    op.create_table(
        "address_feedback",
        sa.Column("email_hash", sa.String(length=64), nullable=False),
        sa.Column("soft_bounces", JSON, nullable=False, comment="[[occurred_at, event key], ...]"),
        sa.Column("last_delivered_at", UTCDateTime(), nullable=True),
        sa.Column("hard_bounced_at", UTCDateTime(), nullable=True),
        sa.Column("complained_at", UTCDateTime(), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("email_hash", name=op.f("pk_address_feedback")),
    )
    op.create_table(
        "address_history",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("email_hash", sa.String(length=64), nullable=False),
        sa.Column("event", sa.String(length=16), nullable=False),
        sa.Column("decision", sa.String(length=32), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("campaign_id", BIG_ID, nullable=True),
        sa.Column("code", sa.String(length=32), nullable=True),
        sa.Column("diagnostic", sa.Text(), nullable=True),
        sa.Column("occurred_at", UTCDateTime(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_address_history")),
    )
    op.create_index(
        op.f("ix_address_history_email_hash_id"), "address_history", ["email_hash", "id"]
    )
    with op.batch_alter_table("campaign_recipients") as batch:
        batch.add_column(sa.Column("delivered_at", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("bounced_at", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("bounce_kind", sa.String(length=8), nullable=True))
        batch.add_column(
            sa.Column(
                "bounce_code",
                sa.String(length=32),
                nullable=True,
                comment="e.g. 550 or 5.1.1, no text",
            )
        )
        batch.add_column(sa.Column("complained_at", UTCDateTime(), nullable=True))
        batch.add_column(
            sa.Column(
                "unsubscribed_at", UTCDateTime(), nullable=True, comment="through this campaign"
            )
        )
        batch.create_check_constraint(
            op.f("ck_campaign_recipients_bounce_kind"), "bounce_kind IN ('hard', 'soft')"
        )
    with op.batch_alter_table("suppressions") as batch:
        batch.drop_constraint(op.f("ck_suppressions_reason"), type_="check")
        batch.create_check_constraint(op.f("ck_suppressions_reason"), NEW_REASONS)


def downgrade() -> None:
    op.execute("DELETE FROM suppressions WHERE reason = 'soft_bounce'")
    with op.batch_alter_table("suppressions") as batch:
        batch.drop_constraint(op.f("ck_suppressions_reason"), type_="check")
        batch.create_check_constraint(op.f("ck_suppressions_reason"), OLD_REASONS)
    with op.batch_alter_table("campaign_recipients") as batch:
        batch.drop_constraint(op.f("ck_campaign_recipients_bounce_kind"), type_="check")
        for column in OUTCOME_COLUMNS:
            batch.drop_column(column)
    op.drop_index(op.f("ix_address_history_email_hash_id"), table_name="address_history")
    op.drop_table("address_history")
    op.drop_table("address_feedback")
    op.drop_index(op.f("ix_inbound_events_status_id"), table_name="inbound_events")
    op.drop_index(op.f("ix_inbound_events_email_hash"), table_name="inbound_events")
    op.drop_index(op.f("ix_inbound_events_received_at"), table_name="inbound_events")
    op.drop_table("inbound_events")
