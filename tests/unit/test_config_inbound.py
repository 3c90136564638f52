"""inbound.* settings of `tidings inbound` (issue 35 item 4): safe defaults for its limits, and
a STARTTLS certificate that cannot be used is refused when the settings load, naming the
settings, instead of failing at the first client's STARTTLS."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tls import self_signed_certificate
from tidings.config import ConfigurationError, load_settings


def test_the_receiver_limits_have_safe_defaults() -> None:
    """An operator who sets nothing still gets a bounded receiver, and one that takes the
    100 recipients RFC 5321 4.5.3.1.8 asks a server to accept."""
    inbound = load_settings().inbound
    assert inbound.max_recipients == 100
    assert (inbound.max_connections, inbound.max_connections_per_client) == (100, 20)
    assert (inbound.idle_timeout_seconds, inbound.session_timeout_seconds) == (60.0, 600.0)
    assert inbound.tls_certificate_file is None


def test_a_certificate_without_its_key_is_refused_naming_both(tmp_path: Path) -> None:
    """Half a STARTTLS configuration would silently offer no TLS."""
    certificate, _ = self_signed_certificate(tmp_path)
    with pytest.raises(ConfigurationError, match="tls_certificate_file and tls_key_file"):
        load_settings(inbound={"tls_certificate_file": str(certificate)})


def test_a_key_that_does_not_match_the_certificate_is_refused(tmp_path: Path) -> None:
    """A wrong key (or an unreadable file) is found at start-up, with the files named."""
    first = tmp_path / "first"
    second = tmp_path / "second"
    first.mkdir()
    second.mkdir()
    certificate, _ = self_signed_certificate(first)
    _, other_key = self_signed_certificate(second)
    with pytest.raises(ConfigurationError, match="cannot load a certificate") as caught:
        load_settings(
            inbound={"tls_certificate_file": str(certificate), "tls_key_file": str(other_key)}
        )
    assert str(certificate) in str(caught.value)
    with pytest.raises(ConfigurationError, match="cannot load a certificate"):
        load_settings(
            inbound={
                "tls_certificate_file": str(tmp_path / "missing.pem"),
                "tls_key_file": str(other_key),
            }
        )
