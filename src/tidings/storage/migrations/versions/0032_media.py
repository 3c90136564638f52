"""Media library (issue 40 item 1, CMP-6).

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.storage.dialect import UTCDateTime

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _variant(size: str) -> list[sa.Column[object]]:
    return [
        sa.Column(f"file_{size}", sa.String(64), nullable=False),
        sa.Column(f"width_{size}", sa.Integer, nullable=False),
        sa.Column(f"height_{size}", sa.Integer, nullable=False),
        sa.Column(f"bytes_{size}", sa.Integer, nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "media",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("source_sha256", sa.String(64), nullable=False, comment="of the bytes uploaded"),
        sa.Column(
            "filename", sa.String(255), nullable=False, comment="the upload's own name, shown"
        ),
        sa.Column("alt", sa.String(500), nullable=False),
        sa.Column("format", sa.String(8), nullable=False),
        sa.Column("original_width", sa.Integer, nullable=False),
        sa.Column("original_height", sa.Integer, nullable=False),
        sa.Column("frames", sa.Integer, nullable=False, server_default="1"),
        *_variant("1x"),
        *_variant("2x"),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column(
            "created_by",
            sa.String(100),
            nullable=False,
            comment="the audit actor: ids, no emails",
        ),
        sa.UniqueConstraint("source_sha256"),
        sa.CheckConstraint("format IN ('png', 'jpeg', 'gif', 'webp')", name="format"),
    )
    op.create_index(op.f("ix_media_file_1x"), "media", ["file_1x"])
    op.create_index(op.f("ix_media_file_2x"), "media", ["file_2x"])


def downgrade() -> None:
    op.drop_table("media")
