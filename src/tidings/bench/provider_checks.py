"""What the bench's provider or Python SMTP sink accepted during a send, counted in SQL: the
addresses it wrote (`bench.lean_servers`) between two offsets of its file are streamed into a
temporary table of the scratch database (COPY on PostgreSQL) and counted there, so the check
that no reader was accepted twice holds no set of addresses in the bench's memory at any
campaign size."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from tidings.storage.database import libpq_url
from tidings.storage.dialect import is_postgresql_url

CHUNK_BYTES = 1 << 20
_CREATE = "CREATE TEMPORARY TABLE provider_accepted (address TEXT NOT NULL)"
_COUNT = "SELECT count(*), count(DISTINCT address) FROM provider_accepted"


async def accepted_at_provider(url: str, log: Path, start: int, end: int) -> dict[str, int]:
    """Addresses the provider accepted between byte offsets `start` and `end` of its `log`,
    the distinct ones, and the difference: readers accepted more than once."""
    if is_postgresql_url(url):
        accepted, distinct = await _count_postgresql(url, log, start, end)
    else:
        database = make_url(url).database
        assert database is not None
        accepted, distinct = await asyncio.to_thread(_count_sqlite, database, log, start, end)
    return {"accepted": accepted, "distinct": distinct, "duplicates": accepted - distinct}


async def _count_postgresql(url: str, log: Path, start: int, end: int) -> tuple[int, int]:
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as conn:
        await conn.execute(_CREATE)
        # COPY's text format is one address a line, as the log is, and may be cut anywhere.
        copying = "COPY provider_accepted (address) FROM STDIN"
        async with conn.cursor() as cursor, cursor.copy(copying) as copy:
            for chunk in _chunks(log, start, end):
                await copy.write(chunk)
        row: Any = await (await conn.execute(_COUNT)).fetchone()
        return int(row[0]), int(row[1])


@contextmanager
def accepted_log() -> Iterator[Path]:
    """An empty file for a server's accepted addresses, removed on exit."""
    with tempfile.TemporaryDirectory(prefix="tidings-bench-") as folder:
        log = Path(folder) / "accepted.txt"
        log.touch()
        yield log


def log_size(log: Path) -> int:
    """Where the provider's next accepted address will be written in `log`."""
    return log.stat().st_size


def _count_sqlite(database: str, log: Path, start: int, end: int) -> tuple[int, int]:
    with closing(sqlite3.connect(database)) as conn:
        conn.execute(_CREATE)
        conn.executemany(
            "INSERT INTO provider_accepted (address) VALUES (?)",
            ((line,) for line in _lines(log, start, end)),
        )
        accepted, distinct = conn.execute(_COUNT).fetchone()
        return int(accepted), int(distinct)


def _chunks(log: Path, start: int, end: int) -> Iterator[bytes]:
    with log.open("rb") as file:
        file.seek(start)
        left = end - start
        while left > 0:
            chunk = file.read(min(CHUNK_BYTES, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk


def _lines(log: Path, start: int, end: int) -> Iterator[str]:
    with log.open("rb") as file:
        file.seek(start)
        left = end - start
        for line in file:
            if left <= 0:
                return
            left -= len(line)
            yield line.rstrip(b"\n").decode()
