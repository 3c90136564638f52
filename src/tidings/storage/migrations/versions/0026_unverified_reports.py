"""Unverified inbound reports (issue 35, PRV-6): a bounce or complaint by mail that no VERP
MAC authenticates is kept as `unverified` for the operator to apply or discard, with who did
which and when.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.storage.dialect import UTCDateTime

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BEFORE = "status IN ('applied', 'unmatched', 'unparsed', 'ignored')"
AFTER = "status IN ('applied', 'unmatched', 'unparsed', 'ignored', 'unverified')"


def upgrade() -> None:
    with op.batch_alter_table("inbound_events") as batch:
        batch.add_column(sa.Column("reviewed", sa.String(16), nullable=True))
        batch.add_column(sa.Column("reviewed_at", UTCDateTime(), nullable=True))
        batch.add_column(
            sa.Column("reviewed_by", sa.String(100), nullable=True, comment="an audit actor label")
        )
        batch.drop_constraint(op.f("ck_inbound_events_status"), type_="check")
        batch.create_check_constraint(op.f("ck_inbound_events_status"), AFTER)
        batch.create_check_constraint(
            op.f("ck_inbound_events_reviewed"),
            "reviewed IS NULL OR reviewed IN ('applied', 'discarded')",
        )


def downgrade() -> None:
    op.execute("DELETE FROM inbound_events WHERE status = 'unverified'")
    with op.batch_alter_table("inbound_events") as batch:
        batch.drop_constraint(op.f("ck_inbound_events_reviewed"), type_="check")
        batch.drop_constraint(op.f("ck_inbound_events_status"), type_="check")
        batch.create_check_constraint(op.f("ck_inbound_events_status"), BEFORE)
        batch.drop_column("reviewed_by")
        batch.drop_column("reviewed_at")
        batch.drop_column("reviewed")
