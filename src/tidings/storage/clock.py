"""The database's clock, the one dialect branch for reading it (PRV-5; DLV-2 wants the same).

Shared limits compare times on the database server's clock, never a worker's, so a worker with
a skewed clock can neither overspend nor starve. Times are seconds since the Unix epoch as a
double, read where the statement runs:

- PostgreSQL: `clock_timestamp()`, the time of the call. Not `now()`: that is the start of the
  transaction, which can lie before a wait for a row lock. The SET and WHERE of an
  `INSERT ... ON CONFLICT DO UPDATE` run once the conflicting row is locked, so the time they
  read comes after any wait for it.
- SQLite: `julianday('now')`, millisecond resolution, and the same value for every call within
  one statement step. Statements that write run under `BEGIN IMMEDIATE`, so after the lock.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, Double, cast, extract, func, literal
from sqlalchemy.ext.asyncio import AsyncConnection

_UNIX_EPOCH_JULIAN_DAY = 2440587.5
_SECONDS_PER_DAY = 86400.0


def database_now(conn: AsyncConnection) -> ColumnElement[float]:
    """Seconds since the Unix epoch on the database server's clock, as a SQL expression."""
    if conn.dialect.name == "postgresql":
        return cast(extract("epoch", func.clock_timestamp()), Double())
    days = func.julianday(literal("now")) - _UNIX_EPOCH_JULIAN_DAY
    return cast(days * _SECONDS_PER_DAY, Double())
