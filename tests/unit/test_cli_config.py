"""An invalid setting stops any command with exit code 2 and one line naming the key (CFG-1)."""

import json

from tests.support.cli import Ran, clean_env, tidings


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
