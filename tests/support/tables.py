"""Every row of every table, to prove a refused request changed nothing. Tables come from the
metadata, so a table added later is covered without editing this file."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from tidings.storage.database import Database
from tidings.storage.tables import metadata

# Book-keeping that a refused request may legitimately write: the key's last use (any
# authenticated call), a rate limiter's count (counting refused requests is its point) and
# the site secrets created on first use.
IGNORED_COLUMNS = {("api_keys", "last_used_at")}
IGNORED_TABLES = {"rate_limits", "site_secrets"}


def rows_of(conn: Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Each table's rows, sorted, with book-keeping columns left out."""
    contents: dict[str, list[tuple[Any, ...]]] = {}
    for table in metadata.sorted_tables:
        if table.name in IGNORED_TABLES:
            continue
        columns = [c for c in table.columns if (table.name, c.name) not in IGNORED_COLUMNS]
        rows = conn.execute(select(*columns))
        contents[table.name] = sorted(tuple(map(repr, row)) for row in rows)
    return contents


async def every_row(db: Database) -> dict[str, list[tuple[Any, ...]]]:
    """`rows_of` through tidings' own (async) database handle."""
    async with db.read() as conn:
        return await conn.run_sync(rows_of)
