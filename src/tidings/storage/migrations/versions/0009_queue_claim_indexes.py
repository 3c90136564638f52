"""Queue indexes shaped like the batch claim, the lease reaper and fenced checks (DLV-2).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PENDING = sa.text("status = 'pending'")
RUNNING = sa.text("status = 'running'")


def upgrade() -> None:
    op.drop_index("ix_jobs_status_run_at", table_name="jobs")
    op.drop_index("ix_jobs_status_locked_until", table_name="jobs")
    op.drop_index("ix_jobs_claim_token", table_name="jobs")
    op.create_index(
        "ix_jobs_kind_run_at_id",
        "jobs",
        ["kind", "run_at", "id"],
        postgresql_where=PENDING,
        sqlite_where=PENDING,
    )
    op.create_index(
        "ix_jobs_locked_until",
        "jobs",
        ["locked_until"],
        postgresql_where=RUNNING,
        sqlite_where=RUNNING,
    )
    op.create_index(
        "ix_jobs_claim_token",
        "jobs",
        ["claim_token"],
        postgresql_where=RUNNING,
        sqlite_where=RUNNING,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_claim_token", table_name="jobs")
    op.drop_index("ix_jobs_locked_until", table_name="jobs")
    op.drop_index("ix_jobs_kind_run_at_id", table_name="jobs")
    op.create_index("ix_jobs_claim_token", "jobs", ["claim_token"])
    op.create_index("ix_jobs_status_locked_until", "jobs", ["status", "locked_until"])
    op.create_index("ix_jobs_status_run_at", "jobs", ["status", "run_at"])
