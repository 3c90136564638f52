"""Command output is clean (issue 13, item 3): log events stay out of it (stderr, warnings and
up, unless --log-level says otherwise), summaries go to stdout, and every listing has --json."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from tests.support.cli import clean_env, tidings
from tidings.cli.main import app

pytestmark = pytest.mark.slow


def _migrated(sqlite_url: str) -> dict[str, str]:
    env = clean_env(DATABASE_URL=sqlite_url, LOG_FORMAT="json")
    assert tidings("migrate", env=env).returncode == 0
    created = tidings(
        "newsletters",
        "create",
        "weekly",
        "--name",
        "The Weekly",
        "--sender-name",
        "Ed",
        "--sender-address",
        "ed@example.org",
        env=env,
    )
    assert created.returncode == 0, created.stderr
    return env


def _log_records(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith('{"')]


def test_import_summary_goes_to_stdout_and_log_events_stay_out(
    sqlite_url: str, tmp_path: Path
) -> None:
    """`tidings subscribers import … > report.txt` must keep the summary, and log records
    must not land in the middle of it (or of the progress bar) unless asked for."""
    env = _migrated(sqlite_url)
    readers = tmp_path / "readers.csv"
    readers.write_text("email,name\nada@example.org,Ada\nnot-an-address,Bad\n")
    quiet = tidings("subscribers", "import", str(readers), "--newsletter", "weekly", env=env)
    assert quiet.returncode == 1  # one row failed
    assert "created" in quiet.stdout
    assert "Rows not imported" in quiet.stdout
    assert _log_records(quiet.stdout) == []
    assert _log_records(quiet.stderr) == []  # the info event `subscribers.imported` is quiet
    chatty = tidings(
        "--log-level", "info", "subscribers", "import", str(readers), "--newsletter", "weekly",
        env=env,
    )  # fmt: skip
    assert "unchanged" in chatty.stdout
    assert _log_records(chatty.stdout) == []
    assert "subscribers.imported" in [record["event"] for record in _log_records(chatty.stderr)]


def test_migrate_reports_the_revision_on_stdout(empty_sqlite_url: str) -> None:
    """Scripts check what `migrate` did by reading its output."""
    result = tidings("migrate", env=clean_env(DATABASE_URL=empty_sqlite_url))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Database at revision ")


def _listing_commands() -> Iterator[tuple[list[str], Any]]:
    """Every `… list` command in the tree (as the reference in docs/cli.md walks it)."""

    def walk(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
        if hasattr(command, "list_commands"):
            context = typer.Context(command)
            for name in command.list_commands(context):
                child = command.get_command(context, name)
                assert child is not None
                yield from walk(child, [*path, name])
        elif path[-1] == "list":
            yield path, command

    yield from walk(typer.main.get_command(app), [])


def test_every_listing_command_prints_json(sqlite_url: str) -> None:
    """Scripts read listings; a table is for people. Each listing must have --json, and its
    output must parse as a JSON list even with nothing to list."""
    env = _migrated(sqlite_url)
    listings = list(_listing_commands())
    assert len(listings) >= 5, listings
    for path, command in listings:
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        assert "--json" in options, path
        result = tidings(*path, "--json", env=env)
        assert result.returncode == 0, (path, result.stderr)
        assert isinstance(json.loads(result.stdout), list), path
