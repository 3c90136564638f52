"""AUD-4 as one SQL expression: the only definition selection and re-checks use."""

from __future__ import annotations

from sqlalchemy import ColumnElement, and_, exists, select

from tidings.storage.tables import subscribers, subscriptions, suppressions


def is_suppressed() -> ColumnElement[bool]:
    """True when the subscriber's keyed address hash is on the suppression list."""
    return exists(
        select(suppressions.c.email_hash).where(
            suppressions.c.email_hash == subscribers.c.email_hash
        )
    )


def mailable() -> ColumnElement[bool]:
    """Confirmed, not unsubscribed, not suppressed. Needs `subscriptions` joined to
    `subscribers` in the query it is used in."""
    return and_(
        subscriptions.c.confirmed_at.is_not(None),
        subscriptions.c.unsubscribed_at.is_(None),
        ~is_suppressed(),
    )
