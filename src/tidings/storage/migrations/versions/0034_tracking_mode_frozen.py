"""The tracking mode a campaign was sent under (issue 37, ENG-1, ENG-7): frozen with the
snapshot at `prepared_at`, so a newsletter's later change of mode neither changes the batches
still to go nor what send again may ask of the campaign. Sends prepared before this revision
keep NULL: what they were sent under is not known.

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0034"
down_revision: str | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("campaign_sends") as batch:
        batch.add_column(
            sa.Column(
                "tracking", sa.String(16), nullable=True, comment="off, aggregate or per_person"
            )
        )
        batch.create_check_constraint(
            op.f("ck_campaign_sends_tracking"), "tracking IN ('off', 'aggregate', 'per_person')"
        )


def downgrade() -> None:
    with op.batch_alter_table("campaign_sends") as batch:
        batch.drop_constraint(op.f("ck_campaign_sends_tracking"), type_="check")
        batch.drop_column("tracking")
