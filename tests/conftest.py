"""Shared fixtures: one database fixture over SQLite and PostgreSQL, settings, the ASGI app,
the batch-provider dev server.

PostgreSQL comes from TIDINGS_TEST_POSTGRES_URL, else 127.0.0.1:5432 when reachable. Each test
gets a database of its own that is dropped afterwards: `database_url` (and `db`, `sqlite_url`)
a copy of a template migrated to head once per test process and dialect, as procrastinate does
(`CREATE DATABASE … TEMPLATE` on PostgreSQL, a file copy on SQLite); `empty_database_url` (and
`empty_sqlite_url`) one that has never been migrated, for the tests of migrations and of what
an unmigrated database does. Under CI=true an unreachable PostgreSQL is a failure, not a skip.
The run ends by printing which dialects were exercised (collected from every xdist worker).
"""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
from psycopg import sql

if TYPE_CHECKING:
    from tidings.devservers.dev_server import DevProviderServer

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


def _admin(statement: sql.Composable) -> None:
    with psycopg.connect(postgres_server_url(), autocommit=True) as conn:
        conn.execute(statement)


def _migrated(url: str) -> None:
    """Migrate `url` to head, in a thread of its own (no test's event loop is touched)."""
    from tidings.storage import migrate
    from tidings.storage.database import create_database

    async def upgrade() -> None:
        database = create_database(url)
        try:
            await migrate.upgrade(database)
        finally:
            await database.dispose()

    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(upgrade())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


class Templates:
    """Databases migrated to head once per test process, copied for each test."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._sqlite: Path | None = None
        self._postgres: str | None = None

    def sqlite_copy(self, target: Path) -> str:
        if self._sqlite is None:
            template = self._folder / "template.db"
            _migrated(f"sqlite:///{template}")
            # The engine's dispose checkpointed the WAL: the one file is the whole database.
            assert not template.with_name("template.db-wal").exists()
            self._sqlite = template
        shutil.copyfile(self._sqlite, target)
        return f"sqlite:///{target}"

    def postgres_copy(self, name: str) -> str:
        if self._postgres is None:
            template = f"tidings_template_{uuid.uuid4().hex[:12]}"
            _admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(template)))
            _migrated(_with_database(postgres_server_url(), template))
            self._postgres = template
        _admin(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(self._postgres)
            )
        )
        return _with_database(postgres_server_url(), name)

    def drop(self) -> None:
        if self._postgres is not None:
            _drop_postgres(self._postgres)


def _drop_postgres(name: str) -> None:
    _admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Templates]:
    made = Templates(tmp_path_factory.mktemp("templates"))
    try:
        yield made
    finally:
        made.drop()


def _require_postgres() -> None:
    reason = postgres_unavailable_reason()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"{reason} (CI=true requires PostgreSQL)")
        pytest.skip(reason)
    DIALECTS_EXERCISED.add("postgresql")


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(
    request: pytest.FixtureRequest, tmp_path: Path, templates: Templates
) -> Iterator[str]:
    """A URL of a fresh database of this test's own, migrated to head, once per dialect."""
    if request.param == "sqlite":
        DIALECTS_EXERCISED.add("sqlite")
        yield templates.sqlite_copy(tmp_path / "tidings-test.db")
        return
    _require_postgres()
    name = f"tidings_test_{uuid.uuid4().hex[:12]}"
    try:
        yield templates.postgres_copy(name)
    finally:
        _drop_postgres(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of a fresh, empty (never migrated) database, once per dialect."""
    if request.param == "sqlite":
        DIALECTS_EXERCISED.add("sqlite")
        yield f"sqlite:///{tmp_path / 'tidings-test.db'}"
        return
    _require_postgres()
    name = f"tidings_test_{uuid.uuid4().hex[:12]}"
    _admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield _with_database(postgres_server_url(), name)
    finally:
        _drop_postgres(name)


@pytest.fixture
def sqlite_url(tmp_path: Path, templates: Templates) -> str:
    """A fresh SQLite database migrated to head."""
    DIALECTS_EXERCISED.add("sqlite")
    return templates.sqlite_copy(tmp_path / "tidings-test.db")


@pytest.fixture
def empty_sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite database that has never been migrated."""
    DIALECTS_EXERCISED.add("sqlite")
    return f"sqlite:///{tmp_path / 'tidings-test.db'}"


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[object]:
    """A database handle on a fresh database migrated to head."""
    from tidings.storage.database import create_database

    database = create_database(database_url)
    try:
        yield database
    finally:
        await database.dispose()


PEAK_RSS_MB: dict[str, int] = {}


def _peak_rss_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024  # KiB on Linux


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: hand its figures to the controller
        workeroutput["tidings_dialects"] = sorted(DIALECTS_EXERCISED)
        workeroutput["tidings_peak_rss_mb"] = _peak_rss_mb()
        workeroutput["tidings_worker"] = session.config.workerinput["workerid"]  # type: ignore[attr-defined]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    output = getattr(node, "workeroutput", {})
    DIALECTS_EXERCISED.update(output.get("tidings_dialects", ()))
    if "tidings_peak_rss_mb" in output:
        PEAK_RSS_MB[output["tidings_worker"]] = output["tidings_peak_rss_mb"]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    exercised = ", ".join(sorted(DIALECTS_EXERCISED)) or "none"
    terminalreporter.write_line(f"tidings: database dialects exercised: {exercised}")
    peaks = {**PEAK_RSS_MB, "main": _peak_rss_mb()}
    shown = ", ".join(f"{name} {mb} MB" for name, mb in sorted(peaks.items()))
    terminalreporter.write_line(f"tidings: peak memory (RSS) of the test processes: {shown}")
    if "postgresql" not in DIALECTS_EXERCISED and postgres_unavailable_reason():
        terminalreporter.write_line(f"tidings: {postgres_unavailable_reason()}")


@pytest.fixture(autouse=True)
def _logging_isolated() -> Iterator[None]:
    """Each test starts with the logging the process started with (see logging_restored):
    with xdist a test that configures logging is followed by any other test, not only by
    the rest of its file."""
    from tests.support.cli import logging_restored

    with logging_restored():
        yield


@pytest.fixture(autouse=True)
def _forget_finished_apps() -> Iterator[None]:
    """Let each test's app be freed when the test ends. FastAPI memoises how it classifies
    each endpoint in module-level LRU caches of 4,096 entries keyed by the callable, and
    fastapi-offline's docs endpoints are closures over their app: without this every app a
    test builds (its routes, container and settings, ~7 MB) stayed alive for the whole run,
    which grew a test process to 3 GB."""
    yield
    from fastapi.dependencies import models

    for cached in vars(models).values():
        if callable(getattr(cached, "cache_clear", None)):
            cached.cache_clear()


@pytest.fixture
async def dev_provider() -> AsyncIterator[DevProviderServer]:
    """The Mailgun-compatible dev server (PRV-4) on a free loopback port, empty, no faults."""
    from tidings.devservers.dev_server import run_dev_provider

    async with run_dev_provider() as server:
        yield server
