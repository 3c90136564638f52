"""`bulk_email.domain_rates` (SND-25) as operators write it: pairs in the environment, a TOML
table in the file, domains matched in lower case, and a typo stops boot naming the key."""

from pathlib import Path

import pytest

from tidings.config import ConfigurationError, load_settings


def test_pairs_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Containers are configured by environment: `gmail.com=600,example.net=300`."""
    monkeypatch.setenv("TIDINGS_BULK_EMAIL_DOMAIN_RATES", "gmail.com=600, Example.NET=300")
    assert load_settings().bulk_email.domain_rates == {"gmail.com": 600, "example.net": 300}


def test_a_toml_table(tmp_path: Path) -> None:
    """The file form: a table of domain = messages per minute."""
    config = tmp_path / "tidings.toml"
    config.write_text('[bulk_email.domain_rates]\n"gmail.com" = 600\n"yahoo.com" = 150.5\n')
    assert load_settings(config).bulk_email.domain_rates == {"gmail.com": 600, "yahoo.com": 150.5}


def test_off_by_default() -> None:
    """Nothing configured: nobody is paced."""
    assert load_settings().bulk_email.domain_rates == {}


@pytest.mark.parametrize("value", ["gmail.com", "gmail.com=fast", "gmail.com=0", "not a domain=5"])
def test_a_mistake_stops_boot_naming_the_key(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """A rate silently ignored would let the workers flood the domain it was meant to protect."""
    monkeypatch.setenv("TIDINGS_BULK_EMAIL_DOMAIN_RATES", value)
    with pytest.raises(ConfigurationError, match="domain_rates"):
        load_settings()


def test_a_quoted_rate_in_the_file_is_refused(tmp_path: Path) -> None:
    """TOML has numbers: `"600"` is a mistake to report, as for every other number setting."""
    config = tmp_path / "tidings.toml"
    config.write_text('[bulk_email.domain_rates]\n"gmail.com" = "600"\n')
    with pytest.raises(ConfigurationError, match=r"bulk_email\.domain_rates.*in the table"):
        load_settings(config)
