"""A database that cannot be connected to is `DatabaseUnreachable`, told apart from errors of
the work done on a connection (issue 13, item 2; HOUSE rule 20)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from tidings.cli.context import free_port
from tidings.config import mask_url_password
from tidings.domain.errors import DatabaseUnreachable, NotReady
from tidings.storage.database import Database, create_database


async def test_refused_connection_names_the_masked_url_and_what_to_check() -> None:
    """The operator needs the URL that was tried and what to check; API clients get neither
    (a 503 like any readiness failure), and the password is never shown to anyone."""
    url = f"postgresql://app:s3cret@127.0.0.1:{free_port()}/news"
    database = create_database(url, shown_url=mask_url_password(url))
    try:
        with pytest.raises(DatabaseUnreachable) as raised:
            async with database.read():
                pass
    finally:
        await database.dispose()
    diagnosis = raised.value.diagnosis
    assert diagnosis.startswith("cannot connect to the database postgresql://app:********@")
    assert "Connection refused" in diagnosis
    assert "that the user app may log in and that the database news exists" in diagnosis
    assert "s3cret" not in diagnosis
    assert isinstance(raised.value, NotReady)
    assert raised.value.detail == "the database is not reachable"


async def test_sqlite_in_a_missing_directory_says_which_directory(tmp_path: Path) -> None:
    """A typo in the SQLite path is the commonest first-run mistake: name the directory."""
    database = create_database(f"sqlite:///{tmp_path / 'missing' / 'tidings.db'}")
    try:
        with pytest.raises(DatabaseUnreachable) as raised:
            async with database.write():
                pass
    finally:
        await database.dispose()
    assert f"the directory {tmp_path / 'missing'} does not exist" in raised.value.diagnosis


async def test_errors_of_the_work_on_a_connection_pass_unchanged(db: Database) -> None:
    """Only failing to connect means "unreachable": a failing statement is a bug to see as
    itself, not a database to go and check."""
    with pytest.raises(DBAPIError):
        async with db.read() as conn:
            await conn.execute(text("SELECT * FROM no_such_table"))
