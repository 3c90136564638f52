"""docs/going-live.md and the files it ships (issue 26): what a test can see of going live."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tidings.cli.banner import real_mail_line
from tidings.config import Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "going-live.md"
UNITS = sorted((ROOT / "examples" / "systemd").glob("*.service"))
ENV_FILE = ROOT / "examples" / "systemd" / "tidings.env"


def _example_settings(monkeypatch: pytest.MonkeyPatch) -> Settings:
    for line in ENV_FILE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            monkeypatch.setenv(key, value)
    return load_settings()


def test_example_environment_is_valid_and_ready_for_real_mail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Operators copy the example: it must load, and set every identity setting."""
    settings = _example_settings(monkeypatch)
    assert settings.email.provider == "smtp"
    assert real_mail_line(settings).startswith("ready")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd not installed")
@pytest.mark.parametrize("unit", UNITS, ids=lambda path: path.name)
def test_systemd_units_verify(unit: Path, tmp_path: Path) -> None:
    """A unit with a typo fails on the operator's server at boot; systemd checks it here."""
    # ExecStart must name an executable that exists: this checkout's own `tidings`.
    executable = Path(sys.executable).parent / "tidings"
    text = unit.read_text().replace("/opt/tidings/venv/bin/tidings", str(executable))
    assert str(executable) in text
    copy = tmp_path / unit.name
    copy.write_text(text)
    checked = subprocess.run(
        ["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stderr
    assert unit.name.removesuffix(".service").removeprefix("tidings-") in ("api", "worker")
    command = "api" if "api" in unit.name else "worker"
    assert f"tidings {command}" in text


def test_units_are_shipped_for_the_api_and_the_worker() -> None:
    """The guide installs exactly these two units; a renamed file breaks its commands."""
    assert [unit.name for unit in UNITS] == ["tidings-api.service", "tidings-worker.service"]


@pytest.mark.parametrize(
    "needed",
    [
        "v=spf1",
        "v=DKIM1",
        "v=DMARC1; p=none",
        "_domainkey",
        "return path",
        "Mailgun",
        "Amazon SES",
        "SNS",
        "plain SMTP relay",
        "reverse_proxy 127.0.0.1:8000",  # Caddy
        "proxy_pass http://127.0.0.1:8000",  # nginx
        "examples/systemd",
        ".backup",
        "pg_dump",
        "pg_restore",
        "tidings migrate",
        "dkim.selector",
        "dkim.domain",
        "dkim.private_key_file",
        "TIDINGS_DKIM_PRIVATE_KEY_FILE",
        "Key rotation",
        "spamassassin -t",
        "tidings outbox show ID --raw",
    ],
)
def test_going_live_guide_covers(needed: str) -> None:
    """Each step of going live a new operator needs is in the guide."""
    assert needed in GUIDE.read_text()


def test_readme_send_for_real_links_the_guide() -> None:
    """New users stop at the README's "send for real": it must lead to the guide."""
    readme = (ROOT / "README.md").read_text()
    line = next(line for line in readme.splitlines() if "send for real" in line)
    assert "docs/going-live.md" in line
