"""Newsletter welcome email: an optional subject and body sent after a person confirms.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("newsletters") as batch:
        batch.add_column(sa.Column("welcome_subject", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("welcome_body", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("newsletters") as batch:
        batch.drop_column("welcome_body")
        batch.drop_column("welcome_subject")
