"""The CLI works from a fresh database: migrate, keys create/list/revoke (CLI-1, API-2)."""

import json
import os
import subprocess
import sys

import pytest


def _tidings(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TIDINGS_DATABASE_URL": database_url, "TIDINGS_LOG_FORMAT": "json"}
    return subprocess.run(
        [sys.executable, "-m", "tidings", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_keys_commands_on_a_fresh_database(database_url: str) -> None:
    """The first admin key can only come from the CLI, so it must work on a fresh database."""
    before = _tidings(database_url, "keys", "list")
    assert before.returncode == 1
    assert "tidings migrate" in before.stderr
    assert _tidings(database_url, "migrate").returncode == 0
    created = _tidings(database_url, "keys", "create", "ops", "--json")
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)
    assert key["key"].startswith("tdk_")
    listed = json.loads(_tidings(database_url, "keys", "list", "--json").stdout)
    assert [(row["id"], row["revoked_at"]) for row in listed] == [(key["id"], None)]
    assert key["key"] not in json.dumps(listed)
    assert _tidings(database_url, "keys", "revoke", key["id"]).returncode == 0
    listed = json.loads(_tidings(database_url, "keys", "list", "--json").stdout)
    assert listed[0]["revoked_at"] is not None
    unknown = _tidings(database_url, "keys", "revoke", "zzzzzzzzzz")
    assert unknown.returncode == 1
    assert "no API key" in unknown.stderr
    assert "Traceback" not in unknown.stderr


@pytest.mark.slow
def test_demo_runs_end_to_end() -> None:
    """`make demo` is the first thing a new user runs; it must work on a fresh machine."""
    result = subprocess.run(
        [sys.executable, "-m", "tidings", "demo"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "stopped cleanly (exit 0)" in result.stdout
