"""Unverified inbound reports (issue 35, PRV-6): placeholder, filled in by the inbound change.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-04
"""

from collections.abc import Sequence

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
