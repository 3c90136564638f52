"""The one dialect branch for INSERT ... ON CONFLICT (SQLite and PostgreSQL spell it alike,
but SQLAlchemy needs the dialect's own `insert`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection


def insert_for(conn: AsyncConnection, table: Table) -> Any:
    """The dialect-specific insert construct, which has `on_conflict_do_*`."""
    return (pg_insert if conn.dialect.name == "postgresql" else sqlite_insert)(table)
