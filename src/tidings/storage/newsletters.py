"""Named queries for newsletters (AUD-1)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.errors import Conflict
from tidings.storage.errors import ErrorFactory, constraint_errors
from tidings.storage.tables import newsletters, subscriptions


@dataclass(frozen=True, slots=True)
class NewsletterRow:
    id: int
    slug: str
    name: str
    description: str
    sender_name: str
    sender_address: str
    reply_to: str | None
    double_opt_in: bool
    created_at: datetime
    updated_at: datetime
    welcome_subject: str | None = None
    welcome_body: str | None = None
    archive: bool = False
    tracking: str = "off"  # ENG-1: off, aggregate, per_person
    # The sunset policy (ENG-7): off by default; see `audience/sunset.py`.
    sunset_enabled: bool = False
    sunset_after_days: int = 180
    sunset_min_sends: int = 5
    sunset_grace_days: int = 30


def _row(row: Any) -> NewsletterRow:
    return NewsletterRow(**dict(row._mapping))


def _slug_taken(slug: str) -> dict[str, ErrorFactory]:
    return {
        "uq_newsletters_slug": lambda: Conflict(
            f"a newsletter with slug {slug!r} exists", field="slug"
        )
    }


def _in_use() -> Conflict:
    return Conflict("the newsletter has subscriptions or campaigns")


# RESTRICT keys: a subscription or campaign that arrived after the caller's check.
IN_USE = {
    "fk_subscriptions_newsletter_id_newsletters": _in_use,
    "fk_campaigns_newsletter_id_newsletters": _in_use,
}


async def insert_newsletter(conn: AsyncConnection, **values: Any) -> NewsletterRow:
    """Conflict (field `slug`) when the slug is taken."""
    with constraint_errors(_slug_taken(values["slug"])):
        result = await conn.execute(insert(newsletters).values(**values).returning(newsletters))
    return _row(result.one())


async def get_by_slug(conn: AsyncConnection, slug: str) -> NewsletterRow | None:
    row = (await conn.execute(select(newsletters).where(newsletters.c.slug == slug))).first()
    return None if row is None else _row(row)


async def get_by_id(conn: AsyncConnection, newsletter_id: int) -> NewsletterRow | None:
    query = select(newsletters).where(newsletters.c.id == newsletter_id)
    row = (await conn.execute(query)).first()
    return None if row is None else _row(row)


async def list_newsletters(conn: AsyncConnection) -> list[NewsletterRow]:
    return [_row(row) for row in await conn.execute(select(newsletters).order_by(newsletters.c.id))]


async def update_newsletter(
    conn: AsyncConnection, newsletter_id: int, **values: Any
) -> NewsletterRow | None:
    """Conflict (field `slug`) when a new slug is taken."""
    with constraint_errors(_slug_taken(values.get("slug", ""))):
        result = await conn.execute(
            update(newsletters)
            .where(newsletters.c.id == newsletter_id)
            .values(**values)
            .returning(newsletters)
        )
    row = result.first()
    return None if row is None else _row(row)


async def delete_newsletter(conn: AsyncConnection, newsletter_id: int) -> bool:
    """Conflict when subscriptions or campaigns still point at it (FK RESTRICT)."""
    with constraint_errors(IN_USE):
        result = await conn.execute(delete(newsletters).where(newsletters.c.id == newsletter_id))
    return result.rowcount == 1


async def has_subscriptions(conn: AsyncConnection, newsletter_id: int) -> bool:
    query = select(exists().where(subscriptions.c.newsletter_id == newsletter_id))
    return bool((await conn.execute(query)).scalar())
