"""Engagement (issue 36, ENG-1..6): the newsletter's tracking mode, a subscriber's tracking
consent, a campaign's tracked links, the hits as received, the first human hit of each
(message, link, kind), the counters results are read from, and consented people's hits.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tidings.storage.dialect import UTCDateTime

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _key(name: str, table: str) -> sa.Column[int]:
    return sa.Column(
        name,
        BigId,
        sa.ForeignKey(f"{table}.id", ondelete="CASCADE"),
        nullable=False,
        primary_key=True,
    )


def upgrade() -> None:
    with op.batch_alter_table("newsletters") as batch:
        batch.add_column(sa.Column("tracking", sa.String(16), nullable=False, server_default="off"))
    with op.batch_alter_table("subscribers") as batch:
        batch.add_column(sa.Column("tracking_consent_at", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("tracking_consent_source", sa.String(16), nullable=True))
    with op.batch_alter_table("subscriptions") as batch:
        batch.add_column(sa.Column("tracking_consent_asked_at", UTCDateTime(), nullable=True))
    op.create_table(
        "campaign_links",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "campaign_id",
            BigId,
            sa.ForeignKey("campaigns.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("segment", sa.String(64), nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("hidden", sa.Boolean(), nullable=False, server_default="0"),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("campaign_id", "segment", "number"),
        sa.CheckConstraint("number >= 0", name="number"),
    )
    op.create_table(
        "engagement_intake",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("received_at", UTCDateTime(), nullable=False),
        sa.Column("campaign_id", sa.BigInteger, nullable=False),
        sa.Column("segment", sa.String(64), nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("message_key", sa.String(32), nullable=False),
        sa.Column("recipient_id", sa.BigInteger, nullable=True),
        sa.Column(
            "sent_at", UTCDateTime(), nullable=True, comment="when the message was handed over"
        ),
        sa.Column("verdict", sa.String(8), nullable=False),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("client_family", sa.String(32), nullable=False),
        sa.CheckConstraint("kind IN ('open', 'click')", name="kind"),
        sa.CheckConstraint("verdict IN ('human', 'machine')", name="verdict"),
    )
    op.create_table(
        "engagement_firsts",
        _key("campaign_id", "campaigns"),
        sa.Column("segment", sa.String(64), primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String(8), primary_key=True),
        sa.Column("message_key", sa.String(32), primary_key=True),
    )
    op.create_table(
        "engagement_counters",
        _key("campaign_id", "campaigns"),
        sa.Column("segment", sa.String(64), primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String(8), primary_key=True),
        sa.Column("hour", UTCDateTime(), primary_key=True),
        sa.Column("human_unique", sa.Integer, nullable=False, server_default="0"),
        sa.Column("human_total", sa.Integer, nullable=False, server_default="0"),
        sa.Column("machine_total", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_table(
        "engagement_person_hits",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "campaign_id",
            BigId,
            sa.ForeignKey("campaigns.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "subscriber_id",
            BigId,
            sa.ForeignKey("subscribers.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("segment", sa.String(64), nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("verdict", sa.String(8), nullable=False),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("client_family", sa.String(32), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.CheckConstraint("kind IN ('open', 'click')", name="kind"),
        sa.CheckConstraint("verdict IN ('human', 'machine')", name="verdict"),
    )
    op.create_index(
        op.f("ix_engagement_person_hits_subscriber_id_at"),
        "engagement_person_hits",
        ["subscriber_id", "at"],
    )
    op.create_index(
        op.f("ix_engagement_person_hits_campaign_id"), "engagement_person_hits", ["campaign_id"]
    )
    op.create_index(op.f("ix_engagement_person_hits_at"), "engagement_person_hits", ["at"])
    op.create_table(
        "engagement_notices",
        _key("campaign_id", "campaigns"),
        _key("subscriber_id", "subscribers"),
        sa.Column("at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    for table in (
        "engagement_notices",
        "engagement_person_hits",
        "engagement_counters",
        "engagement_firsts",
        "engagement_intake",
        "campaign_links",
    ):
        op.drop_table(table)
    with op.batch_alter_table("subscriptions") as batch:
        batch.drop_column("tracking_consent_asked_at")
    with op.batch_alter_table("subscribers") as batch:
        batch.drop_column("tracking_consent_source")
        batch.drop_column("tracking_consent_at")
    with op.batch_alter_table("newsletters") as batch:
        batch.drop_column("tracking")
