"""A database that cannot be reached, or a port in use, is one clear line and exit code 2 in
every command, never a traceback (issue 13, item 2)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import IN_CI, postgres_server_url, postgres_unavailable_reason
from tests.support.cli import clean_env, tidings, tidings_process
from tidings.cli.context import free_port

pytestmark = pytest.mark.slow
PASSWORD = "hunter2-secret"


def _postgres_url(user: str, database: str) -> str:
    """A URL on the test server with another user or database, and a password to mask."""
    reason = postgres_unavailable_reason()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"{reason} (CI=true requires PostgreSQL)")
        pytest.skip(reason)
    server = postgres_server_url().split("@", 1)[1].rsplit("/", 1)[0]
    return f"postgresql://{user}:{PASSWORD}@{server}/{database}"


UNREACHABLE = {
    "nothing listens on the port": (
        lambda tmp: f"postgresql://postgres:{PASSWORD}@127.0.0.1:{free_port()}/tidings",
        "Connection refused",
    ),
    "unknown host": (
        lambda tmp: f"postgresql://postgres:{PASSWORD}@no-such-host.invalid/tidings",
        "no-such-host.invalid",
    ),
    "unknown user": (
        lambda tmp: _postgres_url("no_such_tidings_user", "postgres"),
        'role "no_such_tidings_user" does not exist',
    ),
    "missing database": (
        lambda tmp: _postgres_url("postgres", "no_such_tidings_database"),
        'database "no_such_tidings_database" does not exist',
    ),
    "SQLite file in a missing directory": (
        lambda tmp: f"sqlite:///{tmp / 'no-such-dir' / 'tidings.db'}",
        "the directory {tmp}/no-such-dir does not exist",
    ),
}


def _assert_one_clear_line(stderr: str, url_fragment: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: cannot connect to the database "), stderr
    assert url_fragment in lines[0], stderr
    assert "TIDINGS_DATABASE_URL" in lines[0]
    assert PASSWORD not in stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize("case", list(UNREACHABLE))
def test_unreachable_database_is_one_line_naming_the_url_and_what_to_check(
    case: str, tmp_path: Path
) -> None:
    """The first thing a new operator gets wrong is the database URL: the answer must say
    which URL was tried (without its password) and what is wrong with it, not a traceback."""
    make_url, said = UNREACHABLE[case]
    url = make_url(tmp_path)
    result = tidings("newsletters", "list", env=clean_env(DATABASE_URL=url, LOG_FORMAT="json"))
    assert result.returncode == 2, result.stderr
    _assert_one_clear_line(result.stderr, said.replace("{tmp}", str(tmp_path)))
    if "@" in url:
        assert ":********@" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("command", [["migrate"], ["serve"], ["api"], ["worker"]])
def test_every_kind_of_command_reports_an_unreachable_database_alike(
    command: list[str], tmp_path: Path
) -> None:
    """Servers log JSON: a failed start must still be one line and exit 2, not a traceback
    inside a log record that an operator has to unpick."""
    url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{free_port()}/tidings"
    extra = ["--port", str(free_port())] if command[0] in {"serve", "api"} else []
    # Servers configure their logging (uvicorn's too) for the process: run one.
    result = tidings_process(*command, *extra, env=clean_env(DATABASE_URL=url, LOG_FORMAT="json"))
    assert result.returncode == 2, result.stderr
    _assert_one_clear_line(result.stderr, "postgresql://postgres:********@127.0.0.1:")


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port another program listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


@pytest.mark.parametrize(
    ("command", "option"),
    [
        ("serve", "--port"),
        ("api", "--port"),
        ("worker", "--metrics-port"),
        ("dev-smtp", "--port"),
        ("dev-provider", "--port"),
    ],
)
def test_a_port_in_use_is_one_line_naming_the_setting(
    command: str, option: str, busy_port: int, tmp_path: Path
) -> None:
    """A second `tidings serve`, or any program on 8000, is a common first-hour collision;
    the answer must name the port and how to choose another, and start nothing."""
    env = clean_env(DATABASE_URL=f"sqlite:///{tmp_path / 'tidings.db'}", LOG_FORMAT="json")
    result = tidings_process(command, option, str(busy_port), env=env)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"127.0.0.1:{busy_port}" in lines[0]
    assert "already in use" in lines[0]
    assert option in lines[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "tidings.db").exists()  # nothing started, nothing created
