"""The CLI works from a fresh database: migrate, keys create/list/revoke (CLI-1, API-2)."""

import json
from collections import Counter
from email import message_from_bytes, policy
from email.utils import getaddresses
from pathlib import Path

import pytest

from tests.support.cli import Ran, clean_env, tidings, tidings_process
from tidings.domain.email_headers import message_id


def _tidings(database_url: str, *args: str) -> Ran:
    return tidings(*args, env=clean_env(DATABASE_URL=database_url, LOG_FORMAT="json"))


def test_keys_commands_on_a_fresh_database(empty_database_url: str) -> None:
    """The first admin key can only come from the CLI, so it must work on a fresh database."""
    before = _tidings(empty_database_url, "keys", "list")
    assert before.returncode == 1
    assert "tidings migrate" in before.stderr
    assert _tidings(empty_database_url, "migrate").returncode == 0
    created = _tidings(empty_database_url, "keys", "create", "ops", "--json")
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)
    assert key["key"].startswith("tdk_")
    listed = json.loads(_tidings(empty_database_url, "keys", "list", "--json").stdout)
    assert [(row["id"], row["revoked_at"]) for row in listed] == [(key["id"], None)]
    assert key["key"] not in json.dumps(listed)
    assert _tidings(empty_database_url, "keys", "revoke", key["id"]).returncode == 0
    listed = json.loads(_tidings(empty_database_url, "keys", "list", "--json").stdout)
    assert listed[0]["revoked_at"] is not None
    unknown = _tidings(empty_database_url, "keys", "revoke", "zzzzzzzzzz")
    assert unknown.returncode == 1
    assert "no API key" in unknown.stderr
    assert "Traceback" not in unknown.stderr


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    """`make demo` is the first thing a new user runs; it must work on a fresh machine, and
    what it shows — a form signup confirmed through the emailed link, generated readers
    imported, a campaign reaching every one of them once (over several batches), the paid ones
    with their own version, under the documented Message-ID, then a bounce and a complaint
    heard back and both readers suppressed — must be what really happened. 2,500 readers
    rather than the default 10,000: the same steps, a quarter of the time."""
    workdir = tmp_path / "demo"
    result = tidings_process("demo", "--dir", str(workdir), "--subscribers", "2500", timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    printed = " ".join(result.stdout.split())
    assert "stopped cleanly (exit 0)" in printed
    assert "campaign 1: submitted, 2501/2501 processed: 2501 sent, 0 excluded" in printed
    for line in (
        "2,500 generated confirmed subscribers imported (2,000 free, 500 paid)",
        "candidates 2,501",
        "submitted 2,501",
        "excluded 0",
        "failed 0",
        "uncertain 0",
        "duplicates found in the sink 0",
        "1 hard bounce, 1 complaint",
        "people and machines counted apart: 40 human opens, 100 machine; 14 human clicks, 20",
        "bounce-gone@example.org, complain-cross@example.org suppressed",
        f"the messages: {workdir / 'mail'}",
        "/docs",
    ):
        assert line in printed, line
    received = [
        message_from_bytes(path.read_bytes(), policy=policy.compat32)
        for path in sorted((workdir / "mail").glob("*.eml"))
    ]
    confirmations = [m for m in received if "Confirm" in str(m["Subject"])]
    assert [getaddresses([str(m["To"])])[0][1] for m in confirmations] == ["ada@example.net"]
    issue = [m for m in received if m["Subject"] == "Issue 1: hello from tidings"]
    readers = Counter(getaddresses([str(m["To"])])[0][1] for m in issue)
    expected = {f"reader{n:05d}@example.org" for n in range(1998)}
    expected |= {"bounce-gone@example.org", "complain-cross@example.org"}  # they hear back
    expected |= {f"member{n:05d}@example.org" for n in range(500)}
    expected |= {"ada@example.net"}
    assert len(expected) == 2_501
    assert set(readers) == expected
    assert set(readers.values()) == {1}
    for message in issue[::97] + [m for m in issue if "ada@" in str(m["To"])]:
        address = getaddresses([str(message["To"])])[0][1]
        assert message["Message-ID"] == message_id("1", address, "example.org")
        plain = next(p for p in message.walk() if p.get_content_type() == "text/plain")
        text = " ".join(plain.get_payload(decode=True).decode().split())
        assert ("Members' corner" in text) == address.startswith("member")
