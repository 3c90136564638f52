"""Send rates: one shared GCRA row per provider (SPEC PRV-5).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "send_rates",
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("theoretical_arrival", sa.Double(), nullable=False),
        sa.Column("cooldown_until", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("provider", name=op.f("pk_send_rates")),
    )


def downgrade() -> None:
    op.drop_table("send_rates")
