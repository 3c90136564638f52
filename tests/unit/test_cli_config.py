"""An invalid setting stops any command with exit code 2 and one line naming the key (CFG-1)."""

import json
from pathlib import Path

from tests.support.cli import Ran, clean_env, tidings
from tidings.cli.banner import database_line, email_line
from tidings.config import load_settings


def _tidings(*args: str, **env: str) -> Ran:
    return tidings(*args, env={**clean_env(), **env})


def test_invalid_value_exits_2_with_one_line_naming_the_key() -> None:
    """A bad setting stops the CLI with exit code 2 and the key to fix (CFG-1)."""
    result = _tidings("config", "show", TIDINGS_HTTP_PORT="eighty")
    assert result.returncode == 2
    assert "http.port" in result.stderr
    assert "TIDINGS_HTTP_PORT" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_config_show_masks_secrets_and_reports_effective_values() -> None:
    """`config show` is pasted into tickets: secrets must never appear in it."""
    result = _tidings(
        "config",
        "show",
        "--json",
        TIDINGS_SITE_SECRET="s3cr3t-value-long-enough-for-32-bytes",
        TIDINGS_HTTP_PORT="8123",
    )
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["http"]["port"] == 8123
    assert shown["site"]["secret"] == "********"
    assert "s3cr3t" not in result.stdout


def test_config_show_prints_a_file_that_config_loads_back_unchanged(tmp_path: Path) -> None:
    """An operator saves `config show` as their configuration file: read back with
    `--config` (and nothing in the environment), it must give the same settings —
    durations, URLs, numbers and all (secrets are masked, so they are left unset)."""
    env = {
        "TIDINGS_BULK_EMAIL_RESUME_MAX_AGE": "90m",
        "TIDINGS_QUEUE_LEASE_SECONDS": "45.5",
        "TIDINGS_HTTP_PORT": "8123",
        "TIDINGS_THEME_POSTAL_ADDRESS": "The Gazette, 1 [bold]Quay[/] Street, Porthaven",
        "TIDINGS_SITE_PUBLIC_URL": "https://news.example.org/a-very-long-path/" + "x" * 150,
    }
    shown = _tidings("config", "show", **env)
    assert shown.returncode == 0, shown.stderr
    saved = tmp_path / "tidings.toml"
    saved.write_text(shown.stdout)
    again = _tidings("--config", str(saved), "config", "show", "--json")  # the file alone
    first = _tidings("config", "show", "--json", **env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == json.loads(first.stdout)
    assert 'resume_max_age = "90m"' in shown.stdout


def test_a_quoted_number_in_the_file_stops_the_cli_with_exit_2_naming_the_key(
    tmp_path: Path,
) -> None:
    """A file typed wrong stops boot exactly as a wrong environment variable does (CFG-1)."""
    config = tmp_path / "tidings.toml"
    config.write_text('[bulk_email]\nbatch_creation_concurrency = "2"\n')
    result = _tidings("--config", str(config), "config", "show")
    assert result.returncode == 2
    assert "bulk_email.batch_creation_concurrency" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_config_show_masks_secrets_inside_urls() -> None:
    """A password in a URL's query string or userinfo is as secret as a password setting."""
    env = {
        "TIDINGS_DATABASE_URL": "postgresql://tidings@db.internal/news?password=db-hunter2&sslmode=require",
        "TIDINGS_MAILGUN_API_BASE_URL": "https://api:key-hunter3@api.mailgun.test",
    }
    for output in ("--json", None):
        result = _tidings("config", "show", *([output] if output else []), **env)
        assert result.returncode == 0, result.stderr
        assert "hunter" not in result.stdout
        assert "postgresql://tidings@db.internal/news?password=********&sslmode=require" in (
            result.stdout
        )
        assert "https://api:********@api.mailgun.test" in result.stdout


def test_the_start_up_banner_masks_secrets_inside_urls() -> None:
    """The banner lands in terminals and service logs: a key in a URL must not."""
    settings = load_settings(
        database={"url": "postgresql://tidings@db.internal/news?password=db-hunter2"},
        email={"provider": "mailgun"},
        mailgun={
            "api_base_url": "https://api:key-hunter3@api.mailgun.test",
            "domain": "mg.example.org",
            "api_key": "key-test",
        },
    )
    lines = database_line(settings) + "\n" + email_line(settings)
    assert "hunter" not in lines
    assert "password=********" in lines
    assert "https://api:********@api.mailgun.test" in lines
