"""audience: newsletters, subscribers, subscriptions, labels, suppressions

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from tidings.storage.dialect import UTCDateTime

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "labels",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_labels")),
        sa.UniqueConstraint("name", name=op.f("uq_labels_name")),
    )
    op.create_table(
        "newsletters",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("slug", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), server_default="", nullable=False),
        sa.Column("sender_name", sa.String(length=200), nullable=False),
        sa.Column("sender_address", sa.String(length=320), nullable=False),
        sa.Column("reply_to", sa.String(length=320), nullable=True),
        sa.Column("double_opt_in", sa.Boolean(), server_default="1", nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_newsletters")),
        sa.UniqueConstraint("slug", name=op.f("uq_newsletters_slug")),
    )
    op.create_table(
        "rate_limits",
        sa.Column(
            "bucket",
            sa.String(length=100),
            nullable=False,
            comment="scope:keyed-hash, never raw PII",
        ),
        sa.Column("window_start", UTCDateTime(), nullable=False),
        sa.Column("hits", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("bucket", "window_start", name=op.f("pk_rate_limits")),
    )
    with op.batch_alter_table("rate_limits", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_rate_limits_window_start"), ["window_start"], unique=False
        )

    op.create_table(
        "subscribers",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("email_key", sa.String(length=320), nullable=False),
        sa.Column("email_hash", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("tier", sa.String(length=16), server_default="free", nullable=False),
        sa.Column(
            "attributes",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.CheckConstraint("tier IN ('free', 'paid', 'comped')", name=op.f("ck_subscribers_tier")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscribers")),
        sa.UniqueConstraint("email_key", name=op.f("uq_subscribers_email_key")),
    )
    with op.batch_alter_table("subscribers", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_subscribers_email_hash"), ["email_hash"], unique=False)
        batch_op.create_index(batch_op.f("ix_subscribers_tier"), ["tier"], unique=False)

    op.create_table(
        "suppression_log",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("email_hash", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("note", sa.String(length=500), nullable=True),
        sa.Column("actor", sa.String(length=100), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.CheckConstraint(
            "action IN ('suppress', 'lift')", name=op.f("ck_suppression_log_action")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_suppression_log")),
    )
    with op.batch_alter_table("suppression_log", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_suppression_log_email_hash"), ["email_hash"], unique=False
        )

    op.create_table(
        "suppressions",
        sa.Column("email_hash", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("note", sa.String(length=500), nullable=True),
        sa.Column("created_by", sa.String(length=100), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.CheckConstraint(
            "reason IN ('hard_bounce', 'complaint', 'admin', 'unsubscribe_all')",
            name=op.f("ck_suppressions_reason"),
        ),
        sa.PrimaryKeyConstraint("email_hash", name=op.f("pk_suppressions")),
    )
    op.create_table(
        "subscriber_labels",
        sa.Column(
            "subscriber_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("label_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.ForeignKeyConstraint(
            ["label_id"],
            ["labels.id"],
            name=op.f("fk_subscriber_labels_label_id_labels"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["subscriber_id"],
            ["subscribers.id"],
            name=op.f("fk_subscriber_labels_subscriber_id_subscribers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("subscriber_id", "label_id", name=op.f("pk_subscriber_labels")),
    )
    with op.batch_alter_table("subscriber_labels", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_subscriber_labels_label_id"), ["label_id"], unique=False
        )

    op.create_table(
        "subscriptions",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "subscriber_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column(
            "newsletter_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("confirmed_at", UTCDateTime(), nullable=True),
        sa.Column("consent_evidence", sa.String(length=200), nullable=True),
        sa.Column("unsubscribed_at", UTCDateTime(), nullable=True),
        sa.Column("unsubscribe_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_unsubscribed_at", UTCDateTime(), nullable=True),
        sa.Column("confirm_token_hash", sa.String(length=64), nullable=True),
        sa.Column("confirm_token_expires_at", UTCDateTime(), nullable=True),
        sa.CheckConstraint(
            "source IN ('form', 'api', 'import', 'admin')", name=op.f("ck_subscriptions_source")
        ),
        sa.CheckConstraint(
            "unsubscribed_at IS NULL OR "
            "(unsubscribe_count >= 1 AND last_unsubscribed_at IS NOT NULL)",
            name=op.f("ck_subscriptions_unsubscribed_has_history"),
        ),
        sa.ForeignKeyConstraint(
            ["newsletter_id"],
            ["newsletters.id"],
            name=op.f("fk_subscriptions_newsletter_id_newsletters"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["subscriber_id"],
            ["subscribers.id"],
            name=op.f("fk_subscriptions_subscriber_id_subscribers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subscriptions")),
        sa.UniqueConstraint("confirm_token_hash", name=op.f("uq_subscriptions_confirm_token_hash")),
        sa.UniqueConstraint(
            "subscriber_id",
            "newsletter_id",
            name=op.f("uq_subscriptions_subscriber_id_newsletter_id"),
        ),
    )
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_subscriptions_newsletter_id_subscriber_id"),
            ["newsletter_id", "subscriber_id"],
            unique=False,
        )


def downgrade() -> None:

    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_subscriptions_newsletter_id_subscriber_id"))

    op.drop_table("subscriptions")
    with op.batch_alter_table("subscriber_labels", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_subscriber_labels_label_id"))

    op.drop_table("subscriber_labels")
    op.drop_table("suppressions")
    with op.batch_alter_table("suppression_log", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_suppression_log_email_hash"))

    op.drop_table("suppression_log")
    with op.batch_alter_table("subscribers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_subscribers_tier"))
        batch_op.drop_index(batch_op.f("ix_subscribers_email_hash"))

    op.drop_table("subscribers")
    with op.batch_alter_table("rate_limits", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_rate_limits_window_start"))

    op.drop_table("rate_limits")
    op.drop_table("newsletters")
    op.drop_table("labels")
