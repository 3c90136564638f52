"""Operators (SPEC UI-2): roles and disabling on admin accounts, TOTP two-factor and its
recovery codes, a role and a parent on API keys, and the audit log.

Revision ID: 0017
Revises: 0013
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.storage.dialect import UTCDateTime

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSON = sa.JSON().with_variant(sa.dialects.postgresql.JSONB(), "postgresql")
ROLES = "role IN ('owner', 'editor', 'viewer')"


def upgrade() -> None:
    # Every account made before roles existed could do everything: each stays an owner.
    with op.batch_alter_table("admin_accounts") as batch:
        batch.add_column(
            sa.Column("role", sa.String(length=16), server_default="owner", nullable=False)
        )
        batch.add_column(sa.Column("disabled_at", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("password_changed_at", UTCDateTime(), nullable=True))
        batch.add_column(
            sa.Column(
                "totp_secret",
                sa.String(length=64),
                nullable=True,
                comment="base32 TOTP secret, set at enrolment",
            )
        )
        batch.add_column(sa.Column("totp_enabled_at", UTCDateTime(), nullable=True))
        batch.add_column(
            sa.Column(
                "totp_last_step",
                sa.BigInteger(),
                nullable=True,
                comment="the last TOTP time step used: a code is accepted once",
            )
        )
        batch.create_check_constraint(batch.f("ck_admin_accounts_role"), ROLES)
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(
            sa.Column("role", sa.String(length=16), server_default="owner", nullable=False)
        )
        batch.add_column(
            sa.Column(
                "parent_id",
                sa.String(length=16),
                nullable=True,
                comment="the key that minted this one; revoking it revokes this",
            )
        )
        batch.create_check_constraint(batch.f("ck_api_keys_role"), ROLES)
        batch.create_foreign_key(
            batch.f("fk_api_keys_parent_id_api_keys"), "api_keys", ["parent_id"], ["id"]
        )
        batch.create_index(batch.f("ix_api_keys_parent_id"), ["parent_id"], unique=False)
    op.create_table(
        "admin_recovery_codes",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("admin_id", BIG_ID, nullable=False),
        sa.Column("code_hash", sa.String(length=64), nullable=False, comment="SHA-256 of the code"),
        sa.Column("used_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["admin_id"],
            ["admin_accounts.id"],
            name=op.f("fk_admin_recovery_codes_admin_id_admin_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_admin_recovery_codes")),
    )
    with op.batch_alter_table("admin_recovery_codes") as batch:
        batch.create_index(batch.f("ix_admin_recovery_codes_admin_id"), ["admin_id"], unique=False)
    op.create_table(
        "audit_log",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("occurred_at", UTCDateTime(), nullable=False),
        sa.Column(
            "actor",
            sa.String(length=100),
            nullable=False,
            comment="admin:<id>, key:<id>, cli:<login>",
        ),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=True),
        sa.Column("client_ip", sa.String(length=64), nullable=True),
        sa.Column("detail", JSON, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    with op.batch_alter_table("audit_log") as batch:
        batch.create_index(batch.f("ix_audit_log_occurred_at"), ["occurred_at"], unique=False)
        batch.create_index(batch.f("ix_audit_log_action"), ["action"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_index(batch.f("ix_audit_log_action"))
        batch.drop_index(batch.f("ix_audit_log_occurred_at"))
    op.drop_table("audit_log")
    with op.batch_alter_table("admin_recovery_codes") as batch:
        batch.drop_index(batch.f("ix_admin_recovery_codes_admin_id"))
    op.drop_table("admin_recovery_codes")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_index(batch.f("ix_api_keys_parent_id"))
        batch.drop_constraint(batch.f("fk_api_keys_parent_id_api_keys"), type_="foreignkey")
        batch.drop_constraint(batch.f("ck_api_keys_role"), type_="check")
        batch.drop_column("parent_id")
        batch.drop_column("role")
    with op.batch_alter_table("admin_accounts") as batch:
        batch.drop_constraint(batch.f("ck_admin_accounts_role"), type_="check")
        batch.drop_column("totp_last_step")
        batch.drop_column("totp_enabled_at")
        batch.drop_column("totp_secret")
        batch.drop_column("password_changed_at")
        batch.drop_column("disabled_at")
        batch.drop_column("role")
