"""Shared fixtures: one database fixture over SQLite and PostgreSQL, settings, the ASGI app,
the batch-provider dev server.

PostgreSQL comes from TIDINGS_TEST_POSTGRES_URL, else 127.0.0.1:5432 when reachable. Each test
gets a fresh database that is dropped afterwards. Under CI=true an unreachable PostgreSQL is a
failure, not a skip. The run ends by printing which dialects were exercised.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
from psycopg import sql

if TYPE_CHECKING:
    from tidings.delivery.dev_server import DevProviderServer

# Browser fixtures (pytest-playwright on the system Chromium), for every test that needs a page.
pytest_plugins = ["tests.support.browser"]

# Tests configure tidings explicitly; a developer's own TIDINGS_* must not leak in.
for _name in [
    n for n in os.environ if n.startswith("TIDINGS_") and n != "TIDINGS_TEST_POSTGRES_URL"
]:
    del os.environ[_name]

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
DIALECTS_EXERCISED: set[str] = set()


def postgres_server_url() -> str:
    return os.environ.get("TIDINGS_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)


@cache
def postgres_unavailable_reason() -> str | None:
    try:
        with psycopg.connect(postgres_server_url(), connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"PostgreSQL unreachable at {postgres_server_url()}: {type(exc).__name__}"


def _with_database(server_url: str, name: str) -> str:
    base, _, _ = server_url.rpartition("/")
    return f"{base}/{name}"


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of a fresh, empty database, once per dialect."""
    if request.param == "sqlite":
        DIALECTS_EXERCISED.add("sqlite")
        yield f"sqlite:///{tmp_path / 'tidings-test.db'}"
        return
    reason = postgres_unavailable_reason()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"{reason} (CI=true requires PostgreSQL)")
        pytest.skip(reason)
    DIALECTS_EXERCISED.add("postgresql")
    name = f"tidings_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server_url(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield _with_database(postgres_server_url(), name)
    finally:
        with psycopg.connect(postgres_server_url(), autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    DIALECTS_EXERCISED.add("sqlite")
    return f"sqlite:///{tmp_path / 'tidings-test.db'}"


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[object]:
    """A migrated database handle on a fresh database."""
    from tidings.storage import migrate
    from tidings.storage.database import create_database

    database = create_database(database_url)
    await migrate.upgrade(database)
    try:
        yield database
    finally:
        await database.dispose()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    exercised = ", ".join(sorted(DIALECTS_EXERCISED)) or "none"
    terminalreporter.write_line(f"tidings: database dialects exercised: {exercised}")
    if "postgresql" not in DIALECTS_EXERCISED and postgres_unavailable_reason():
        terminalreporter.write_line(f"tidings: {postgres_unavailable_reason()}")


@pytest.fixture
async def dev_provider() -> AsyncIterator[DevProviderServer]:
    """The Mailgun-compatible dev server (PRV-4) on a free loopback port, empty, no faults."""
    from tidings.delivery.dev_server import run_dev_provider

    async with run_dev_provider() as server:
        yield server
