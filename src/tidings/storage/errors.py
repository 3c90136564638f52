"""Driver errors stop here (HOUSE rule 20): constraint violations become domain errors by the
constraint's name, unstorable values become `UnstorableValue`, and an unreachable database
becomes `NotReady`. Nothing above `storage/` and `queue/` imports `sqlalchemy.exc`.

Like procrastinate's manager, which turns a unique violation on its queueing-lock index into
`AlreadyEnqueued`, a named query wraps the statement that may violate a constraint in
`constraint_errors({name: error})`. Only the constraints it names are translated: any other
integrity error is a bug and surfaces as one, never as "the slug exists".

PostgreSQL names the violated constraint. SQLite names a CHECK constraint, and the columns of
a UNIQUE one, which the table definitions turn back into its name. For a foreign key it names
nothing: every foreign key the statement could have violated is then a candidate, and the
error is translated only when the caller gave them all, with one meaning.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import ForeignKeyConstraint, PrimaryKeyConstraint, Table, UniqueConstraint
from sqlalchemy.engine import URL
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
    StatementError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout

from tidings.domain.errors import DatabaseUnreachable, InvalidInput, NotReady, TidingsError
from tidings.domain.jobs import DatabaseBusy
from tidings.storage.dialect import is_sqlite_url
from tidings.storage.tables import metadata

ErrorFactory = Callable[[], TidingsError]
_SQLITE_UNIQUE = re.compile(r"UNIQUE constraint failed: (.+)")
_SQLITE_CHECK = re.compile(r"CHECK constraint failed: (\w+)")
_SQLITE_FOREIGN_KEY = "FOREIGN KEY constraint failed"
# SQLite's primary result codes for "another connection holds the lock" (extended codes such
# as SQLITE_BUSY_SNAPSHOT carry them in the low byte).
_SQLITE_BUSY_CODES = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED
# PostgreSQL: lock_not_available, serialization_failure, deadlock_detected. Each means "the
# same request again, a little later, will do".
_POSTGRES_BUSY_STATES = frozenset({"55P03", "40001", "40P01"})
_STATEMENT_TABLE = re.compile(r"^\s*(INSERT INTO|UPDATE|DELETE FROM)\s+\"?(\w+)", re.IGNORECASE)


class UnstorableValue(InvalidInput):
    """The database refused a value: a NUL character in text or JSON (PostgreSQL), or an
    integer out of range (both). The caller's input, so 422 rather than 500."""

    def __init__(self) -> None:
        super().__init__(
            "a value cannot be stored: it holds a NUL character or a number out of range"
        )


@contextmanager
def constraint_errors(meaning: Mapping[str, ErrorFactory]) -> Iterator[None]:
    """Raise `meaning[name]()` for a violation of a constraint named here; re-raise any other."""
    try:
        yield
    except IntegrityError as exc:
        candidates = violated_constraints(exc)
        factories = {meaning.get(name) for name in candidates}
        if not candidates or None in factories or len(factories) != 1:
            raise
        (factory,) = factories
        assert factory is not None
        raise factory() from None


def violated_constraints(error: IntegrityError) -> frozenset[str]:
    """The name of the constraint `error` violated: one name, or on SQLite's unnamed foreign
    key violations every foreign key the statement could have broken. Empty when unknown
    (a NOT NULL violation has no name)."""
    diagnostic = getattr(error.orig, "diag", None)
    if diagnostic is not None:  # psycopg
        name = diagnostic.constraint_name
        return frozenset({name}) if name else frozenset()
    message = str(error.orig)
    if match := _SQLITE_CHECK.search(message):
        return frozenset({match.group(1)})
    if match := _SQLITE_UNIQUE.search(message):
        return _unique_named(match.group(1))
    if _SQLITE_FOREIGN_KEY in message:
        return _foreign_keys_of_statement(str(error.statement or ""))
    return frozenset()


def _unique_named(columns: str) -> frozenset[str]:
    """`table.a, table.b` (SQLite's wording) -> the unique key or index on those columns."""
    qualified = [part.strip().split(".", 1) for part in columns.split(",")]
    table = metadata.tables.get(qualified[0][0])
    if table is None:
        return frozenset()
    wanted = {column for _, column in qualified}
    keys: list[tuple[object, set[str]]] = [
        (key.name, {column.name for column in key.columns})
        for key in table.constraints
        if isinstance(key, UniqueConstraint | PrimaryKeyConstraint)
    ]
    keys += [
        (index.name, {c.name for c in index.columns}) for index in table.indexes if index.unique
    ]
    return frozenset(str(name) for name, key_columns in keys if key_columns == wanted)


def _foreign_keys_of_statement(statement: str) -> frozenset[str]:
    """A DELETE can break the foreign keys that point at its table and keep their rows; an
    INSERT or UPDATE, the table's own."""
    match = _STATEMENT_TABLE.match(statement)
    table = metadata.tables.get(match.group(2)) if match else None
    if match is None or table is None:
        return frozenset()
    if match.group(1).upper() == "DELETE FROM":
        # Only a key that keeps the parent (RESTRICT, NO ACTION) can refuse a delete: one that
        # cascades or sets null follows it.
        return frozenset(
            str(key.name)
            for other in metadata.tables.values()
            for key in _pointing_at(other, table)
            if (key.ondelete or "NO ACTION").upper() in ("RESTRICT", "NO ACTION")
        )
    return frozenset(
        str(key.name) for key in table.constraints if isinstance(key, ForeignKeyConstraint)
    )


def _pointing_at(table: Table, target: Table) -> list[ForeignKeyConstraint]:
    return [
        key
        for key in table.constraints
        if isinstance(key, ForeignKeyConstraint) and key.referred_table is target
    ]


@contextmanager
def unstorable_values() -> Iterator[None]:
    """A value the database cannot hold becomes `UnstorableValue`; other errors pass. (The
    SQLite driver raises a bare OverflowError for an integer beyond 64 bits.)"""
    try:
        yield
    except OverflowError:
        raise UnstorableValue() from None
    except StatementError as exc:
        refused_value = isinstance(exc, DataError) or (
            not isinstance(exc, IntegrityError) and isinstance(exc.orig, OverflowError | ValueError)
        )
        if not refused_value:
            raise
        raise UnstorableValue() from None


def is_busy(error: BaseException) -> bool:
    """Whether `error` says the database was too busy for the statement, not that it failed."""
    if isinstance(error, PoolTimeout):
        return True
    if not isinstance(error, OperationalError):
        return False
    code = getattr(error.orig, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _SQLITE_BUSY_CODES
    return getattr(error.orig, "sqlstate", None) in _POSTGRES_BUSY_STATES


# PostgreSQL: connection exceptions (class 08), and the server shutting down or starting up.
_POSTGRES_GONE_STATES = frozenset({"57P01", "57P02", "57P03"})


def is_outage(error: BaseException) -> bool:
    """Whether `error` says the database was briefly out of reach — unreachable, busy, or the
    connection lost mid-transaction (a restart) — so the same idempotent write may be tried
    again once it is back. A failing statement is not an outage."""
    if isinstance(error, DatabaseUnreachable | DatabaseBusy):
        return True
    if not isinstance(error, DBAPIError):
        return False
    if error.connection_invalidated or isinstance(error, InterfaceError):
        return True
    state = getattr(error.orig, "sqlstate", None)
    return (
        isinstance(error, OperationalError)
        and isinstance(state, str)
        and (state.startswith("08") or state in _POSTGRES_GONE_STATES)
    )


@contextmanager
def busy_as_retry_later() -> Iterator[None]:
    """A busy database becomes `DatabaseBusy` (503 with Retry-After in the API, a retry for a
    job); every other error passes unchanged."""
    try:
        yield
    except SQLAlchemyError as exc:
        if not is_busy(exc):
            raise
        raise DatabaseBusy() from None


def unreachable_database(url: URL, shown_url: str, error: BaseException) -> DatabaseUnreachable:
    """Describe a failed connection to `url` (shown to people as `shown_url`)."""
    setting = "database.url, TIDINGS_DATABASE_URL"
    if is_sqlite_url(url):
        if folder := missing_sqlite_folder(url):
            reason = f"the directory {folder} does not exist"
            advice = "Create it, or point the URL at a file in an existing directory"
        else:
            reason = _driver_message(error)
            advice = "Check that the file is an SQLite database this user may read and write"
    else:
        reason = _driver_message(error)
        advice = (
            f"Check that PostgreSQL is running on {url.host or 'localhost'}:{url.port or 5432}, "
            f"that the user {url.username or '(none)'} may log in and that the database "
            f"{url.database or '(none)'} exists"
        )
    return DatabaseUnreachable(
        f"cannot connect to the database {shown_url}: {reason}. {advice} ({setting})."
    )


def missing_sqlite_folder(url: URL) -> Path | None:
    """The directory an SQLite database file should be in, when it does not exist."""
    folder = Path(url.database or ".").parent
    return None if folder.is_dir() else folder


def _driver_message(error: BaseException) -> str:
    """The driver's own words, on one line: `FATAL: database "x" does not exist`."""
    original = getattr(error, "orig", None) or error
    first_line = str(original).strip().splitlines()[0] if str(original).strip() else ""
    # psycopg: 'connection failed: connection to server at "h", port 5432 failed: FATAL: ...'
    message = re.sub(r"^.*\bfailed: ", "", first_line)
    return " ".join(message.split()) or type(original).__name__


@contextmanager
def unreachable_as_not_ready() -> Iterator[None]:
    """For probes (readiness, metrics): any database failure means "not ready"."""
    try:
        yield
    except (SQLAlchemyError, OSError):
        raise NotReady("the database is not reachable") from None
