"""Recipient rows change in place (issue 27): no index on `state`, and on PostgreSQL pages
kept half free, so an outcome or a provider event is a heap-only update with no index entries.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FILLFACTOR = 50  # tables.RECIPIENT_FILLFACTOR when this revision was written


def upgrade() -> None:
    op.create_index(op.f("ix_campaign_recipients_batch_id"), "campaign_recipients", ["batch_id"])
    op.drop_index(op.f("ix_campaign_recipients_batch_id_state"), "campaign_recipients")
    op.drop_index(op.f("ix_campaign_recipients_campaign_id_state"), "campaign_recipients")
    if op.get_bind().dialect.name == "postgresql":
        # New pages only; the pages already written keep their rows until they are rewritten.
        op.execute(f"ALTER TABLE campaign_recipients SET (fillfactor = {FILLFACTOR})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE campaign_recipients RESET (fillfactor)")
    op.create_index(
        op.f("ix_campaign_recipients_campaign_id_state"),
        "campaign_recipients",
        ["campaign_id", "state"],
    )
    op.create_index(
        op.f("ix_campaign_recipients_batch_id_state"),
        "campaign_recipients",
        ["batch_id", "state"],
    )
    op.drop_index(op.f("ix_campaign_recipients_batch_id"), "campaign_recipients")
