"""A brief database outage, on either dialect, for tests of what survives one: PostgreSQL
refuses new connections and drops every open one (as a restart does); SQLite, which cannot go
away, has its one write lock held by another process (every write meets "busy")."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator

import psycopg
from psycopg import sql


@contextlib.asynccontextmanager
async def database_outage(database_url: str) -> AsyncIterator[None]:
    """The database out of reach for the duration of the block."""
    if database_url.startswith("sqlite"):
        # Taken off the event loop: the app's writer may hold the lock mid-transaction,
        # waiting for this loop to run its next statement.
        holder = sqlite3.connect(
            database_url.removeprefix("sqlite:///"),
            isolation_level=None,
            timeout=30,
            check_same_thread=False,
        )
        try:
            await asyncio.to_thread(holder.execute, "BEGIN IMMEDIATE")
            yield
            holder.execute("ROLLBACK")
        finally:
            holder.close()
        return
    base, _, name = database_url.rpartition("/")
    database = sql.Identifier(name)
    async with await psycopg.AsyncConnection.connect(f"{base}/postgres", autocommit=True) as admin:
        await admin.execute(
            sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS false").format(database)
        )
        try:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                [name],
            )
            yield
        finally:
            await admin.execute(
                sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS true").format(database)
            )
