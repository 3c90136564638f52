"""The `mailgun` settings: what choosing Mailgun requires, and which values are refused (PRV-2)."""

import pytest

from tidings.config import ConfigurationError, load_settings, masked


def test_choosing_mailgun_without_a_key_names_the_missing_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without credentials every batch would fail with 401; start-up must say what is missing."""
    monkeypatch.setenv("TIDINGS_EMAIL_PROVIDER", "mailgun")
    monkeypatch.setenv("TIDINGS_MAILGUN_DOMAIN", "mg.example.com")
    with pytest.raises(ConfigurationError, match=r"mailgun\.api_key \(TIDINGS_MAILGUN_API_KEY\)"):
        load_settings()


def test_choosing_mailgun_without_a_domain_names_the_missing_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The domain is part of the API path and of every Message-ID; it cannot be guessed."""
    monkeypatch.setenv("TIDINGS_EMAIL_PROVIDER", "mailgun")
    monkeypatch.setenv("TIDINGS_MAILGUN_API_KEY", "key-123")
    with pytest.raises(ConfigurationError, match=r"mailgun\.domain \(TIDINGS_MAILGUN_DOMAIN\)"):
        load_settings()


def test_mailgun_settings_are_read_and_the_key_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Operators configure Mailgun by environment; the key must never show in `config show`."""
    monkeypatch.setenv("TIDINGS_EMAIL_PROVIDER", "mailgun")
    monkeypatch.setenv("TIDINGS_MAILGUN_API_KEY", "key-very-secret")
    monkeypatch.setenv("TIDINGS_MAILGUN_DOMAIN", "mg.example.com")
    monkeypatch.setenv("TIDINGS_MAILGUN_API_BASE_URL", "https://api.eu.mailgun.net")
    monkeypatch.setenv("TIDINGS_MAILGUN_SEND_TIME_OPTIMIZATION_HOURS", "48")
    settings = load_settings()
    assert settings.mailgun.domain == "mg.example.com"
    assert str(settings.mailgun.api_base_url).startswith("https://api.eu.mailgun.net")
    assert settings.mailgun.max_batch_size == 1000
    assert settings.mailgun.send_time_optimization_hours == 48
    assert "key-very-secret" not in repr(masked(settings))


def test_mailgun_keys_are_optional_while_another_provider_is_chosen() -> None:
    """Mailgun settings must not stand in the way of the default local capture."""
    settings = load_settings()
    assert settings.email.provider == "capture"
    assert settings.mailgun.api_key is None


@pytest.mark.parametrize(
    ("env", "value", "named"),
    [
        ("TIDINGS_MAILGUN_MAX_BATCH_SIZE", "1001", "mailgun.max_batch_size"),
        ("TIDINGS_MAILGUN_MAX_BATCH_SIZE", "0", "mailgun.max_batch_size"),
        ("TIDINGS_MAILGUN_DOMAIN", "https://mg.example.com", "mailgun.domain"),
        ("TIDINGS_MAILGUN_SEND_TIME_OPTIMIZATION_HOURS", "12", "send_time_optimization_hours"),
        ("TIDINGS_MAILGUN_DELIVERY_TIME_SPREAD_MINUTES", "5000", "delivery_time_spread_minutes"),
    ],
)
def test_mailgun_values_outside_their_limits_are_refused(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, named: str
) -> None:
    """What Mailgun would refuse, or a timeout past the lease (a double send), stops start-up."""
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigurationError, match=named):
        load_settings()


def test_a_mailgun_timeout_past_the_lease_is_refused_when_mailgun_sends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Transactional mail through Mailgun runs under the job's lease: a longer timeout could
    let another worker send it again. With another provider the setting is unused."""
    monkeypatch.setenv("TIDINGS_MAILGUN_TIMEOUT_SECONDS", "55")
    assert load_settings().mailgun.timeout_seconds == 55
    monkeypatch.setenv("TIDINGS_EMAIL_PROVIDER", "mailgun")
    monkeypatch.setenv("TIDINGS_MAILGUN_API_KEY", "key-x")
    monkeypatch.setenv("TIDINGS_MAILGUN_DOMAIN", "mg.example.com")
    with pytest.raises(ConfigurationError, match=r"mailgun\.timeout_seconds must be shorter"):
        load_settings()
