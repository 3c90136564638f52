"""The tracking mode a campaign was sent under (issue 37, ENG-7).

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-05
"""

from collections.abc import Sequence

revision: str = "0034"
down_revision: str | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Reserved: filled by the work named above."""


def downgrade() -> None:
    """Reserved: filled by the work named above."""
