"""Webhook endpoints may opt out of the events a CSV import causes (issue 12, item 10).

Revision ID: 0012
Revises: 0008
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Existing endpoints keep receiving everything they subscribed to, imports included.
    op.add_column(
        "webhook_endpoints",
        sa.Column("include_imports", sa.Boolean(), server_default="1", nullable=False),
    )


def downgrade() -> None:
    with op.batch_alter_table("webhook_endpoints", schema=None) as batch_op:
        batch_op.drop_column("include_imports")
