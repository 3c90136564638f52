"""Feed-to-email (issue 39 item 4, AUT-2).

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-05
"""

from collections.abc import Sequence

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Reserved: filled by the work named above."""


def downgrade() -> None:
    """Reserved: filled by the work named above."""
