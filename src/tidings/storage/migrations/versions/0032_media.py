"""Media library (issue 40 item 1, CMP-6).

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-05
"""

from collections.abc import Sequence

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Reserved: filled by the work named above."""


def downgrade() -> None:
    """Reserved: filled by the work named above."""
