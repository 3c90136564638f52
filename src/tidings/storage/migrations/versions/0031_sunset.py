"""Engagement segments and the sunset policy (issue 37 items 3-4, ENG-7).

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-05
"""

from collections.abc import Sequence

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
