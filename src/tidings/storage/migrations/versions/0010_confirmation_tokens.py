"""Confirmation tokens in their own table: one row per link sent, so asking again leaves
earlier links valid (AUD-5); the token columns leave `subscriptions`.

Revision ID: 0010
Revises: 0014
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.storage.dialect import UTCDateTime

revision: str = "0010"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # Links already in mailboxes keep working. They are read out first: on SQLite the batch
    # rebuild of `subscriptions` drops the old table, and with foreign keys on that would
    # cascade into a table that already referenced it.
    bind = op.get_bind()
    links = bind.execute(
        sa.text(
            "SELECT confirm_token_hash, id, updated_at, confirm_token_expires_at "
            "FROM subscriptions WHERE confirm_token_hash IS NOT NULL "
            "AND confirm_token_expires_at IS NOT NULL"
        )
    ).all()
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_subscriptions_confirm_token_hash"), type_="unique")
        batch_op.drop_column("confirm_token_expires_at")
        batch_op.drop_column("confirm_token_hash")
    op.create_table(
        "confirmation_tokens",
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("subscription_id", BIG_ID, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["subscription_id"],
            ["subscriptions.id"],
            name=op.f("fk_confirmation_tokens_subscription_id_subscriptions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_confirmation_tokens")),
    )
    with op.batch_alter_table("confirmation_tokens", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_confirmation_tokens_subscription_id"), ["subscription_id"], unique=False
        )
    for token_hash, subscription_id, created_at, expires_at in links:
        bind.execute(
            sa.text(
                "INSERT INTO confirmation_tokens (token_hash, subscription_id, created_at, "
                "expires_at) VALUES (:token_hash, :subscription_id, :created_at, :expires_at)"
            ),
            {
                "token_hash": token_hash,
                "subscription_id": subscription_id,
                "created_at": created_at,
                "expires_at": expires_at,
            },
        )


def downgrade() -> None:
    # The newest link of each subscription survives a downgrade (read out first, as above).
    bind = op.get_bind()
    newest = bind.execute(
        sa.text(
            "SELECT subscription_id, token_hash, expires_at FROM confirmation_tokens "
            "ORDER BY created_at, token_hash"
        )
    ).all()
    with op.batch_alter_table("confirmation_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_confirmation_tokens_subscription_id"))
    op.drop_table("confirmation_tokens")
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("confirm_token_hash", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("confirm_token_expires_at", UTCDateTime(), nullable=True))
        batch_op.create_unique_constraint(
            batch_op.f("uq_subscriptions_confirm_token_hash"), ["confirm_token_hash"]
        )
    latest = {
        subscription_id: (token_hash, expires) for subscription_id, token_hash, expires in newest
    }
    for subscription_id, (token_hash, expires_at) in latest.items():
        bind.execute(
            sa.text(
                "UPDATE subscriptions SET confirm_token_hash = :token_hash, "
                "confirm_token_expires_at = :expires_at WHERE id = :subscription_id"
            ),
            {
                "token_hash": token_hash,
                "expires_at": expires_at,
                "subscription_id": subscription_id,
            },
        )
