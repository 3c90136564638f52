"""Paid issues stay paid (issue 35, API-4): `campaigns.archive_public`, whether an issue is in
its newsletter's public archive and feeds. Existing campaigns are public only when their
audience filter is empty: one sent to a filtered audience (`tier:paid`, a label, a custom
field) leaves the archive until the operator marks it public.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(
            sa.Column("archive_public", sa.Boolean(), nullable=False, server_default="0")
        )
    campaigns = sa.table(
        "campaigns", sa.column("archive_public", sa.Boolean()), sa.column("audience_filter")
    )
    op.execute(
        campaigns.update()
        .where(sa.func.trim(campaigns.c.audience_filter) == "")
        .values(archive_public=sa.true())
    )


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("archive_public")
