"""Sending under control (SND-23): a campaign can be `paused`; a send cancelled before its
recipients were handed over leaves them `cancelled` (their batches too) and counts them in
`cancelled_count`; pause, resume and cancel are send interventions (who and when).

Revision ID: 0019
Revises: 0015
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, constraint, before, after)
CHECKS = (
    (
        "campaigns",
        "status",
        "status IN ('draft', 'scheduled', 'pending', 'submitting', 'submitted', 'failed', "
        "'cancelled')",
        "status IN ('draft', 'scheduled', 'pending', 'submitting', 'paused', 'submitted', "
        "'failed', 'cancelled')",
    ),
    (
        "campaign_batches",
        "status",
        "status IN ('pending', 'submitting', 'submitted', 'failed')",
        "status IN ('pending', 'submitting', 'submitted', 'failed', 'cancelled')",
    ),
    (
        "campaign_recipients",
        "state",
        "state IN ('pending', 'sending', 'sent', 'failed', 'excluded', 'uncertain')",
        "state IN ('pending', 'sending', 'sent', 'failed', 'excluded', 'uncertain', 'cancelled')",
    ),
    (
        "send_interventions",
        "action",
        "action IN ('retry', 'reconcile', 'resend')",
        "action IN ('retry', 'reconcile', 'resend', 'pause', 'resume', 'cancel')",
    ),
)


def _swap(table: str, name: str, condition: str) -> None:
    with op.batch_alter_table(table) as batch:
        batch.drop_constraint(op.f(f"ck_{table}_{name}"), type_="check")
        batch.create_check_constraint(op.f(f"ck_{table}_{name}"), condition)


def upgrade() -> None:
    with op.batch_alter_table("campaign_sends") as batch:
        batch.add_column(
            sa.Column(
                "cancelled_count",
                sa.Integer(),
                nullable=True,
                comment="never handed over (SND-23)",
            )
        )
    for table, name, _before, after in CHECKS:
        _swap(table, name, after)


def downgrade() -> None:
    for table, name, before, _after in reversed(CHECKS):
        _swap(table, name, before)
    with op.batch_alter_table("campaign_sends") as batch:
        batch.drop_column("cancelled_count")
