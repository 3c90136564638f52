"""The serve banner names what still blocks mail to real readers (issue 26, going live)."""

from __future__ import annotations

from tidings.bootstrap.schema import SchemaRevision
from tidings.cli.banner import ServerBanner, real_mail_line
from tidings.config import load_settings


def test_banner_names_each_placeholder_that_blocks_a_real_send() -> None:
    """A new operator must learn from the first screen what to set before mailing readers."""
    line = real_mail_line(load_settings())
    assert line.startswith("blocked until you set ")
    for key in ("theme.postal_address", "email.from_address", "site.public_url", "site.name"):
        assert key in line
    assert "docs/going-live.md" in line
    banner = ServerBanner(
        load_settings(), SchemaRevision("0018", "0018"), "http://127.0.0.1:8000", True, None
    ).lines()
    assert any(row.strip().startswith("real mail") and "site.name" in row for row in banner)


def test_banner_says_ready_once_the_identity_is_set() -> None:
    """Once everything is set the banner must stop nagging, or operators learn to ignore it."""
    settings = load_settings(
        theme={"postal_address": "The Gazette, 1 Quay Street, Porthaven"},
        email={"from_address": "desk@news.example.org"},
        site={"public_url": "https://news.example.org", "name": "The Gazette"},
    )
    assert real_mail_line(settings).startswith("ready")
    partly = load_settings(site={"name": "The Gazette"})
    assert "site.name" not in real_mail_line(partly)
