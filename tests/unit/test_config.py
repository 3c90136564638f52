"""Configuration is typed, validated, layered (env over file over defaults) and masked (CFG-1)."""

from pathlib import Path

import pytest

from tidings.config import (
    ConfigurationError,
    load_settings,
    mask_url_password,
    masked,
    setting_origins,
)


def test_defaults_need_no_configuration() -> None:
    """`tidings serve` must work with nothing configured: SQLite file in the working directory."""
    settings = load_settings()
    assert settings.database.url == "sqlite:///./tidings.db"
    assert settings.http.port == 8000


def test_environment_variable_sets_a_nested_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Operators configure containers by environment: TIDINGS_SECTION_KEY sets section.key."""
    monkeypatch.setenv("TIDINGS_DATABASE_URL", "postgresql://u@h/db")
    monkeypatch.setenv("TIDINGS_HTTP_MAX_BODY_BYTES", "2048")
    settings = load_settings()
    assert settings.database.url == "postgresql://u@h/db"
    assert settings.http.max_body_bytes == 2048


def test_toml_file_is_read_and_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file holds the base configuration; the environment overrides single keys."""
    config = tmp_path / "tidings.toml"
    config.write_text('[http]\nport = 9001\nhost = "0.0.0.0"\n[log]\nlevel = "debug"\n')
    monkeypatch.setenv("TIDINGS_HTTP_PORT", "9002")
    settings = load_settings(config)
    assert settings.http.port == 9002
    assert settings.http.host == "0.0.0.0"
    assert settings.log.level == "debug"


@pytest.mark.parametrize(
    ("env", "value", "named"),
    [
        ("TIDINGS_HTTP_PORT", "not-a-port", "http.port (TIDINGS_HTTP_PORT)"),
        ("TIDINGS_HTTP_PORT", "70000", "http.port"),
        ("TIDINGS_DATABASE_URL", "mysql://x", "database.url"),
        ("TIDINGS_LOG_FORMAT", "xml", "log.format"),
        ("TIDINGS_SITE_PUBLIC_URL", "not a url", "site.public_url"),
        ("TIDINGS_BULK_EMAIL_SEND_RATE_PER_SECOND", "-1", "bulk_email.send_rate_per_second"),
        ("TIDINGS_BULK_EMAIL_SEND_RATE_PER_SECOND", "nan", "bulk_email.send_rate_per_second"),
    ],
)
def test_invalid_value_names_the_key(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, named: str
) -> None:
    """A bad value must stop start-up with a message an operator can act on."""
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigurationError) as caught:
        load_settings()
    assert named in str(caught.value)
    assert "\n" not in str(caught.value)


def test_unknown_key_in_file_is_an_error(tmp_path: Path) -> None:
    """A typo in a key name must not be silently ignored."""
    config = tmp_path / "tidings.toml"
    config.write_text("[http]\nprot = 1\n")
    with pytest.raises(ConfigurationError, match=r"http\.prot .*unknown setting"):
        load_settings(config)


def test_missing_or_malformed_file_is_a_configuration_error(tmp_path: Path) -> None:
    """A missing or broken config file is a clear configuration error, not a traceback."""
    with pytest.raises(ConfigurationError, match="not found"):
        load_settings(tmp_path / "absent.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[http\n")
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_settings(broken)


def test_secrets_are_masked_when_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """`config show` output gets pasted into tickets; it must not carry secrets."""
    monkeypatch.setenv("TIDINGS_SITE_SECRET", "hunter2-very-secret-and-long-enough-now")
    monkeypatch.setenv("TIDINGS_DATABASE_URL", "postgresql://app:pw123@db/tidings")
    shown = repr(masked(load_settings()))
    assert "hunter2" not in shown
    assert "pw123" not in shown
    assert mask_url_password("postgresql://app:pw@db/x") == "postgresql://app:********@db/x"


@pytest.mark.parametrize("secret", ["", "short", "x" * 31, "é" * 15])
def test_a_short_site_secret_stops_boot(secret: str) -> None:
    """Every signed link hangs on site.secret: one short enough to brute-force from a single
    link would let anyone forge unsubscribe and preference links, so boot refuses it."""
    with pytest.raises(ConfigurationError) as refused:
        load_settings(site={"secret": secret})
    assert "site.secret (TIDINGS_SITE_SECRET): must be at least 32 bytes" in str(refused.value)
    assert secret not in str(refused.value) or not secret


def test_a_site_secret_of_32_bytes_is_accepted() -> None:
    """32 bytes is the documented minimum; unset still means one is generated."""
    assert load_settings(site={"secret": "é" * 16}).site.secret is not None
    assert load_settings().site.secret is None


@pytest.mark.parametrize("zone", ["Mars/Olympus", "Europe", "../etc/passwd", "utc", ""])
def test_a_time_zone_that_is_not_an_iana_name_stops_boot(zone: str) -> None:
    """Schedules are read in site.timezone: a name the machine cannot resolve would fail the
    first time someone schedules an issue, so boot refuses it with the key named."""
    with pytest.raises(ConfigurationError) as refused:
        load_settings(site={"timezone": zone})
    assert "site.timezone (TIDINGS_SITE_TIMEZONE)" in str(refused.value)


def test_the_site_time_zone_defaults_to_utc_and_takes_an_iana_name() -> None:
    """With no setting the admin shows UTC alone; an IANA name is kept as given."""
    assert load_settings().site.timezone == "UTC"
    assert load_settings(site={"timezone": "America/New_York"}).site.timezone == (
        "America/New_York"
    )


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        (
            '[bulk_email]\nbatch_creation_concurrency = "2"\n',
            "bulk_email.batch_creation_concurrency",
        ),
        (
            "[bulk_email]\nbatch_creation_concurrency = 2.0\n",
            "bulk_email.batch_creation_concurrency",
        ),
        (
            "[bulk_email]\nbatch_creation_concurrency = true\n",
            "bulk_email.batch_creation_concurrency",
        ),
        ("[http]\nport = 8000.0\n", "http.port"),
        ('[queue]\nlease_seconds = "30"\n', "queue.lease_seconds"),
        ("[log]\nlevel = 1\n", "log.level"),
        ('[metrics]\nenabled = "yes"\n', "metrics.enabled"),
    ],
)
def test_a_toml_value_of_the_wrong_type_stops_boot_naming_the_key(
    tmp_path: Path, toml: str, named: str
) -> None:
    """TOML has types: a quoted number or a float where a whole number belongs is a mistake
    to report — naming the key — as the environment's `2.5` is, never a value to coerce."""
    config = tmp_path / "tidings.toml"
    config.write_text(toml)
    with pytest.raises(ConfigurationError) as caught:
        load_settings(config)
    assert named in str(caught.value)
    assert "\n" not in str(caught.value)


def test_toml_values_of_the_right_type_are_read(tmp_path: Path) -> None:
    """Whole numbers where numbers belong, text durations, true/false: all accepted."""
    config = tmp_path / "tidings.toml"
    config.write_text(
        '[bulk_email]\nbatch_creation_concurrency = 3\nresume_max_age = "90m"\n'
        "sweep_interval_seconds = 60\n[queue]\nlease_seconds = 45.5\n"
    )
    settings = load_settings(config)
    assert settings.bulk_email.batch_creation_concurrency == 3
    assert settings.bulk_email.resume_max_age.total_seconds() == 5400
    assert (settings.bulk_email.sweep_interval_seconds, settings.queue.lease_seconds) == (60, 45.5)


def test_each_setting_says_where_its_value_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The settings page names the source of each value: the file, the environment (which
    wins over the file), the starting program, or the default."""
    config = tmp_path / "tidings.toml"
    config.write_text('[site]\nname = "From the file"\n[queue]\nlease_seconds = 120\n')
    monkeypatch.setenv("TIDINGS_QUEUE_LEASE_SECONDS", "150")
    settings = load_settings(config, log={"format": "json"})
    origins = setting_origins(settings)
    assert (settings.site.name, origins["site.name"]) == ("From the file", "file")
    assert (settings.queue.lease_seconds, origins["queue.lease_seconds"]) == (150, "environment")
    assert origins["log.format"] == "start-up"
    assert origins["http.port"] == "default"
