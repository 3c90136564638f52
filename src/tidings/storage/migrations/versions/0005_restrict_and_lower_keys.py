"""Restrict newsletter deletion while subscribed; email keys must be lower-case.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_subscriptions_newsletter_id_newsletters"), type_="foreignkey"
        )
        batch_op.create_foreign_key(
            batch_op.f("fk_subscriptions_newsletter_id_newsletters"),
            "newsletters",
            ["newsletter_id"],
            ["id"],
            ondelete="RESTRICT",
        )
    with op.batch_alter_table("subscribers", schema=None) as batch_op:
        batch_op.create_check_constraint(
            batch_op.f("ck_subscribers_email_key_lower"), "email_key = lower(email_key)"
        )


def downgrade() -> None:
    with op.batch_alter_table("subscribers", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("ck_subscribers_email_key_lower"), type_="check")
    with op.batch_alter_table("subscriptions", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_subscriptions_newsletter_id_newsletters"), type_="foreignkey"
        )
        batch_op.create_foreign_key(
            batch_op.f("fk_subscriptions_newsletter_id_newsletters"),
            "newsletters",
            ["newsletter_id"],
            ["id"],
            ondelete="CASCADE",
        )
