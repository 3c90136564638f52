"""Newsletter archive: an opt-in public web archive and feed of sent issues (API-4).

Revision ID: 0018
Revises: 0013
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("newsletters") as batch:
        batch.add_column(sa.Column("archive", sa.Boolean(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("newsletters") as batch:
        batch.drop_column("archive")
