"""Reserved for the next piece of work.

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-05
"""

from collections.abc import Sequence

revision: str = "0035"
down_revision: str | None = "0034"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Reserved: filled by the work named above."""


def downgrade() -> None:
    """Reserved: filled by the work named above."""
