"""Row factories: insert one row with sensible defaults, override only what the test is
about, get the id back. For tests that must write rows the use cases would refuse, or that
need many of them fast; everything else goes through the use cases."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Table, insert
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.storage.tables import campaigns, newsletters, subscribers, subscriptions, suppressions

NOW = datetime(2026, 1, 1, tzinfo=UTC)
_numbers = itertools.count(1)


async def _insert(conn: AsyncConnection, table: Table, values: dict[str, Any]) -> int:
    statement = insert(table).values(values).returning(table.c.id)
    return int((await conn.execute(statement)).scalar_one())


async def newsletter(conn: AsyncConnection, **values: Any) -> int:
    number = next(_numbers)
    defaults = {
        "slug": f"newsletter-{number}",
        "name": f"Newsletter {number}",
        "sender_name": "Editor",
        "sender_address": "editor@example.org",
        "created_at": NOW,
        "updated_at": NOW,
    }
    return await _insert(conn, newsletters, defaults | values)


async def subscriber(conn: AsyncConnection, **values: Any) -> int:
    """`email_key` follows `email` (lower-cased) and `email_hash` follows the key, unless given."""
    email = values.get("email", f"person{next(_numbers)}@example.org")
    email_key = values.get("email_key", email.lower())
    defaults = {
        "email": email,
        "email_key": email_key,
        "email_hash": f"hash:{email_key}",
        "tier": "free",
        "attributes": {},
        "created_at": NOW,
        "updated_at": NOW,
    }
    return await _insert(conn, subscribers, defaults | values)


async def subscription(
    conn: AsyncConnection, subscriber_id: int, newsletter_id: int, **values: Any
) -> int:
    """Pending unless told otherwise; `unsubscribed=True` adds the history the CHECK wants."""
    unsubscribed = values.pop("unsubscribed", False)
    defaults: dict[str, Any] = {
        "subscriber_id": subscriber_id,
        "newsletter_id": newsletter_id,
        "source": "form",
        "created_at": NOW,
        "updated_at": NOW,
    }
    if unsubscribed:
        defaults |= {"unsubscribed_at": NOW, "unsubscribe_count": 1, "last_unsubscribed_at": NOW}
    return await _insert(conn, subscriptions, defaults | values)


async def suppression(conn: AsyncConnection, email_hash: str, **values: Any) -> None:
    defaults = {
        "email_hash": email_hash,
        "reason": "admin",
        "created_by": "tests",
        "created_at": NOW,
    }
    await conn.execute(insert(suppressions).values(defaults | values))


async def campaign(conn: AsyncConnection, newsletter_id: int, **values: Any) -> int:
    defaults = {
        "newsletter_id": newsletter_id,
        "status": "draft",
        "subject": "Subject",
        "body": "Body",
        "body_format": "markdown",
        "created_at": NOW,
        "updated_at": NOW,
    }
    return await _insert(conn, campaigns, defaults | values)
