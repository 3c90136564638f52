"""Another process's SQLite writer, holding the one write lock while a test runs."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def write_lock_held(database_url: str) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection that has taken the write lock (`BEGIN IMMEDIATE`)."""
    holder = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield holder
    finally:
        holder.execute("ROLLBACK")
        holder.close()
