"""Sent mail passes an outside judge (issue 26): SpamAssassin's stock rules score a DKIM-signed
campaign message from `make demo`'s content at 0 or below. Runs only where `spamassassin` is
installed (Debian: apt-get install spamassassin); docs/going-live.md says how to run it."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tidings.cli.demo_campaign import BODY, SENDER, SUBJECT
from tidings.delivery.dkim_signer import DkimSigner
from tidings.rendering import CampaignContent, ListInfo, Sender, TemplateEngine, render_segment
from tidings.rendering.slots import RecipientValues
from tidings.rendering.theme import Theme

pytestmark = pytest.mark.skipif(
    shutil.which("spamassassin") is None or shutil.which("openssl") is None,
    reason="needs spamassassin and openssl",
)


def test_demo_campaign_message_scores_at_most_zero(tmp_path: Path) -> None:
    """Providers filter on scores like these: a clean, signed issue must not look like spam."""
    key = tmp_path / "dkim.pem"
    subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
    rendering = render_segment(
        CampaignContent(subject=SUBJECT, preheader="", body=BODY, body_format="markdown"),
        "free",
        sender=Sender(name="The Weekly", address=SENDER, sending_domain="example.org"),
        list_info=ListInfo(campaign_id="1", newsletter_slug="weekly", newsletter_name="The Weekly"),
        base_url="https://news.example.org",
        engine=TemplateEngine(),
        now=datetime.now(UTC),
        theme=Theme(site_name="The Weekly", postal_address="The Weekly, 1 Quay Street, Porthaven"),
    )
    reader = RecipientValues(
        address="ann@example.net",
        name="Ann Reader",
        unsubscribe_token="u" * 40,
        preferences_token="p" * 40,
        subscriber_id="1",
        recipient_id="1",
    )
    signer = DkimSigner.from_file(selector="news", domain="example.org", path=key)
    message = signer.sign(rendering.personalise(reader))
    # -L: local rules only (no DNS or network tests), as in docs/going-live.md.
    checked = subprocess.run(
        ["spamassassin", "-t", "-L"], input=message, capture_output=True, check=False
    )
    report = checked.stdout.decode(errors="replace")
    found = re.search(r"Content analysis details:\s+\((-?[\d.]+) points", report)
    assert found is not None, report[-2000:]
    assert float(found[1]) <= 0, report[-2000:]
