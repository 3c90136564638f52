"""`tidings serve` and `tidings api` say what they are doing (issue 13, item 4), and /metrics
is served only where the metrics settings say (item 11)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.cli import clean_env, serve_process
from tidings.cli.context import free_port
from tidings.storage import migrate

pytestmark = pytest.mark.slow


def test_serve_names_its_database_mail_workers_and_addresses(tmp_path: Path) -> None:
    """A new operator must see from the first screen where the data lives, that mail is only
    captured (and where to read it), that workers run, and which addresses to open."""
    database = tmp_path / "tidings.db"
    url = f"sqlite:///{database}"
    env = clean_env(DATABASE_URL=url, LOG_FORMAT="json")
    with serve_process(tmp_path, env=env) as served:
        output = served.output()
        base = served.base_url
        assert f"listening on {base}" in output
        assert f"SQLite {database}" in output
        assert f"revision {', '.join(migrate.head_revisions())} (the latest)" in output
        assert "mail is captured locally; see `tidings outbox`" in output
        assert "started in this process: email ×8, webhooks ×16, campaign batches ×2" in output
        for path in ("/subscribe", "/docs"):
            assert f"{base}{path}" in output
            assert httpx.get(f"{base}{path}").status_code == 200, path
        assert f"{base}/admin" in output
        assert httpx.get(f"{base}/admin").headers["location"].startswith("/admin/sign-in")
        assert "metrics    off" in output
        assert httpx.get(f"{base}/metrics").status_code == 404
        assert "{" not in output  # no log record in the banner: logs go to stderr
    assert served.process.returncode == 0, served.log()


def test_api_says_it_runs_no_workers_and_the_schema_is_behind(
    empty_database_url: str, tmp_path: Path
) -> None:
    """`tidings api` neither migrates nor sends: saying so up front (with the command to run)
    saves an operator from waiting for mail that no process will send."""
    env = clean_env(
        DATABASE_URL=empty_database_url,
        LOG_FORMAT="json",
        EMAIL_PROVIDER="smtp",
        SMTP_HOST="relay.test",
    )
    with serve_process(tmp_path, command="api", env=env) as served:
        output = served.output()
    shown = empty_database_url if empty_database_url.startswith("postgresql") else "SQLite "
    assert shown in output
    assert "revision base, not the latest" in output
    assert "run `tidings migrate`" in output
    assert "none in this process: run `tidings worker` beside it" in output
    assert "SMTP relay relay.test:587 (starttls)" in output
    assert "captured locally" not in output


def test_metrics_are_served_on_the_api_port_only_when_enabled(tmp_path: Path) -> None:
    """Metrics need no key: on a public API port they are served only when the operator
    turns them on, and the banner says where."""
    env = clean_env(
        DATABASE_URL=f"sqlite:///{tmp_path / 'tidings.db'}", LOG_FORMAT="json", METRICS_ENABLED="1"
    )
    with serve_process(tmp_path, env=env) as served:
        assert f"metrics    {served.base_url}/metrics" in served.output()
        scraped = httpx.get(f"{served.base_url}/metrics")
    assert scraped.status_code == 200
    assert "tidings_queue_jobs" in scraped.text


def test_metrics_port_serves_them_apart_from_the_api(tmp_path: Path) -> None:
    """With a port of their own, metrics can stay on a private interface while the API is
    public: they answer there, and not on the API port."""
    port = free_port()
    env = clean_env(
        DATABASE_URL=f"sqlite:///{tmp_path / 'tidings.db'}",
        LOG_FORMAT="json",
        METRICS_PORT=str(port),
    )
    with serve_process(tmp_path, env=env) as served:
        assert f"metrics    http://127.0.0.1:{port}/metrics" in served.output()
        scraped = httpx.get(f"http://127.0.0.1:{port}/metrics")
        on_api_port = httpx.get(f"{served.base_url}/metrics")
    assert scraped.status_code == 200
    assert "tidings_http_requests" in scraped.text
    assert on_api_port.status_code == 404
    assert served.process.returncode == 0, served.log()
