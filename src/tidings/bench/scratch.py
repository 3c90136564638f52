"""Scratch databases for benchmarks: created beside the configured one, dropped afterwards."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

from tidings.storage.database import libpq_url
from tidings.storage.dialect import is_sqlite_url


@asynccontextmanager
async def scratch_database(configured_url: str) -> AsyncIterator[str]:
    """Yield the URL of a new, empty database of the same kind (and server) as
    `configured_url`; drop it on exit. SQLite gets a file in a temporary directory."""
    url = make_url(configured_url)
    if is_sqlite_url(url):
        with tempfile.TemporaryDirectory(prefix="tidings-bench-") as directory:
            yield f"sqlite:///{Path(directory) / 'bench.db'}"
        return
    name = f"tidings_scratch_{uuid.uuid4().hex[:12]}"
    server = libpq_url(url)
    async with await psycopg.AsyncConnection.connect(server, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        async with await psycopg.AsyncConnection.connect(server, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
