"""Admin UI accounts and server-side sessions (SPEC UI-1).

Revision ID: 0014
Revises: 0008
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.storage.dialect import UTCDateTime

revision: str = "0014"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "admin_accounts",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column(
            "email", sa.String(length=320), nullable=False, comment="lower-cased sign-in name"
        ),
        sa.Column(
            "password_hash",
            sa.String(length=255),
            nullable=False,
            comment="argon2id, PHC string",
        ),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("last_sign_in_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_admin_accounts")),
        sa.UniqueConstraint("email", name=op.f("uq_admin_accounts_email")),
    )
    op.create_table(
        "admin_sessions",
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("admin_id", BIG_ID, nullable=False),
        sa.Column(
            "csrf_token", sa.String(length=64), nullable=False, comment="per-session form token"
        ),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("last_seen_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["admin_id"],
            ["admin_accounts.id"],
            name=op.f("fk_admin_sessions_admin_id_admin_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_admin_sessions")),
    )
    with op.batch_alter_table("admin_sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_admin_sessions_admin_id"), ["admin_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("admin_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_admin_sessions_admin_id"))
    op.drop_table("admin_sessions")
    op.drop_table("admin_accounts")
