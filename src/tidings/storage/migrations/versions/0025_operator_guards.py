"""Operators' sign-in guards (issue 35 item 5): failed sign-ins counted per scope with the time
of the last one, so a new device waits a delay growing with them (never an hour's lock-out);
audit entries fold repeats (failed sign-ins before authentication: one row per target and hour,
with a count), so the log cannot be flooded.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.storage.dialect import UTCDateTime

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sign_in_failures",
        sa.Column(
            "bucket",
            sa.String(length=100),
            nullable=False,
            comment="scope:keyed-hash, never raw PII",
        ),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_failed_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("bucket", name=op.f("pk_sign_in_failures")),
    )
    op.create_index(
        op.f("ix_sign_in_failures_last_failed_at"), "sign_in_failures", ["last_failed_at"]
    )
    with op.batch_alter_table("audit_log") as batch:
        batch.add_column(
            sa.Column(
                "occurrences",
                sa.Integer(),
                nullable=False,
                server_default="1",
                comment="repeats folded into this entry (failed sign-ins, one row per target "
                "and hour)",
            )
        )
        batch.add_column(
            sa.Column("last_occurred_at", UTCDateTime(), nullable=True, comment="the latest repeat")
        )


def downgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_column("last_occurred_at")
        batch.drop_column("occurrences")
    op.drop_index(op.f("ix_sign_in_failures_last_failed_at"), "sign_in_failures")
    op.drop_table("sign_in_failures")
