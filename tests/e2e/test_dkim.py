"""DKIM signing by tidings (PRV-7): what a receiving server checks, with dkimpy's verifier."""

from __future__ import annotations

import base64
import shutil
import subprocess
from email import message_from_bytes
from pathlib import Path
from typing import Any

import dkim
import pytest
from sqlalchemy import select

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.cli import clean_env, tidings
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    seed,
    wait_for_campaign_status,
    workers,
)
from tests.support.waiting import wait_for
from tidings.config import ConfigurationError, load_settings
from tidings.storage.tables import captured_messages

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


@pytest.fixture(scope="module")
def key_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """A 2048-bit RSA key file and its DNS TXT record, as docs/going-live.md makes them."""
    folder = tmp_path_factory.mktemp("dkim")
    key = folder / "dkim.pem"
    subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
    public = subprocess.run(
        ["openssl", "rsa", "-in", str(key), "-pubout", "-outform", "DER"],
        check=True,
        capture_output=True,
    ).stdout
    return key, b"v=DKIM1; k=rsa; p=" + base64.b64encode(public)


def _dns(record: bytes) -> Any:
    def lookup(name: bytes, timeout: int = 5) -> bytes | None:
        return record if name == b"news._domainkey.example.org." else None

    return lookup


def _dkim(key: Path) -> dict[str, str]:
    return {"selector": "news", "domain": "example.org", "private_key_file": str(key)}


async def test_campaign_mail_is_signed_relaxed_and_verifies(
    database_url: str, key_pair: tuple[Path, bytes]
) -> None:
    """Receivers trust signed mail; the signature must verify and cover what readers see."""
    key, record = key_pair
    settings = make_settings(database_url, queue=FAST_QUEUE, dkim=_dkim(key))
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 3)
        campaign_id = await create_campaign(client, headers)
        await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        async with container.db.read() as conn:
            raws = [row.raw for row in await conn.execute(select(captured_messages.c.raw))]
    assert len(raws) == 3
    for raw in raws:
        assert dkim.verify(raw, dnsfunc=_dns(record))
        signature = message_from_bytes(raw)["DKIM-Signature"]
        tags = dict(
            part.strip().split("=", 1) for part in "".join(signature.split()).split(";") if part
        )
        assert tags["c"] == "relaxed/relaxed"
        assert tags["d"] == "example.org"
        assert tags["s"] == "news"
        signed = tags["h"].lower().split(":")
        for header in ("from", "to", "subject", "date", "message-id", "list-unsubscribe"):
            assert header in signed
        for header in ("from", "to", "subject", "date", "message-id", "content-type"):
            assert signed.count(header) == 2, header
        # A changed body no longer verifies: the signature is worth something.
        assert not dkim.verify(raw.replace(b"Hello", b"Hullo", 1), dnsfunc=_dns(record))
        # Nor does the message with a second Subject or Content-Type put in front (over-signed).
        for added in (b"Subject: Act now\r\n", b"Content-Type: text/html\r\n"):
            assert not dkim.verify(added + raw, dnsfunc=_dns(record))


async def test_outbox_raw_prints_the_signed_message_as_sent(
    database_url: str, key_pair: tuple[Path, bytes]
) -> None:
    """Operators check a signature by hand from the outbox: --raw must be byte-exact."""
    key, record = key_pair
    env = clean_env(
        DATABASE_URL=database_url,
        LOG_FORMAT="json",
        DKIM_SELECTOR="news",
        DKIM_DOMAIN="example.org",
        DKIM_PRIVATE_KEY_FILE=str(key),
    )
    assert tidings("migrate", env=env).returncode == 0
    settings = make_settings(database_url, queue=FAST_QUEUE, dkim=_dkim(key))
    async with api_client(settings) as (client, container):
        await create_newsletter(client, await admin_headers(container))
        await client.post(
            "/api/subscribe", json={"email": "ann@example.org", "newsletter": "weekly"}
        )
        async with workers(container):
            (message,) = await wait_for(lambda: container.captured_mail.list(limit=10))
    shown = tidings("outbox", "show", str(message.id), "--raw", env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("DKIM-Signature:")
    assert dkim.verify(shown.stdout.encode(), dnsfunc=_dns(record))


def test_dkim_settings_are_all_or_none_and_the_key_must_load(tmp_path: Path) -> None:
    """A half-configured or unreadable key must stop the process at boot, naming the key."""
    with pytest.raises(ConfigurationError, match=r"dkim\.private_key_file"):
        load_settings(dkim={"selector": "news", "domain": "example.org"})
    not_a_key = tmp_path / "key.pem"
    not_a_key.write_text("hello\n")
    with pytest.raises(ConfigurationError, match=r"private_key_file.*PEM RSA private key"):
        load_settings(dkim={**_dkim(not_a_key)})
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_settings(dkim={**_dkim(tmp_path / "missing.pem")})
    assert not load_settings().dkim.enabled
