"""No placeholder identity in real mail (issue 13 item 8): through SMTP or Mailgun, sending is
refused while the postal address, the sender address or the public URL are the defaults; the
capture provider works with them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.e2e.audience_helpers import create_newsletter, snapshot
from tests.factories import admin_headers, api_client, make_settings, real_mail
from tests.support.cli import tidings_cli
from tests.support.sending import create_campaign, seed
from tidings.bootstrap import build, start
from tidings.config import load_settings, placeholder_identity
from tidings.domain.identity import is_placeholder_address

DEFAULT_KEYS = ("theme.postal_address", "email.from_address", "site.public_url")
SMTP = {"host": "127.0.0.1", "port": 2525, "security": "none"}


async def test_real_mail_is_refused_under_the_default_identity(database_url: str) -> None:
    """Readers must never get mail from "1 Example Street" with links to 127.0.0.1: every way
    of sending is refused, names what to set, and changes nothing."""
    settings = make_settings(database_url, email={"provider": "smtp"}, smtp=SMTP)
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 3)
        campaign_id = await create_campaign(client, headers)
        before = await snapshot(container)
        url = f"/api/admin/campaigns/{campaign_id}"
        attempts = [
            await client.post(f"{url}/send", headers=headers),
            await client.post(
                f"{url}/schedule", headers=headers, json={"scheduled_at": "2099-01-01T09:00:00Z"}
            ),
            await client.post(f"{url}/test-send", headers=headers, json={"to": ["me@example.org"]}),
            await client.post(
                "/api/admin/emails",
                headers=headers,
                json={"to": "ann@example.org", "subject": "Hi", "text": "Hello"},
            ),
        ]
        for response in attempts:
            assert response.status_code == 409, response.text
            assert response.headers["content-type"] == "application/problem+json"
            problem = response.json()
            assert problem["code"] == "placeholder_identity"
            for key in DEFAULT_KEYS:
                assert key in problem["detail"]
            assert "TIDINGS_THEME_POSTAL_ADDRESS" in problem["detail"]
        assert await snapshot(container) == before
        assert (await client.get(url, headers=headers)).json()["status"] == "draft"


async def test_the_capture_provider_sends_with_the_defaults(database_url: str) -> None:
    """A first run on a laptop needs no configuration: captured mail goes nowhere real."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers, sender_address="news@localhost")
        await seed(container, "weekly", 1)
        campaign_id = await create_campaign(client, headers)
        sent = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        assert sent.status_code == 202, sent.text


async def test_a_newsletter_sender_on_localhost_is_refused_for_real_mail(
    database_url: str,
) -> None:
    """Mail "from" an address at localhost is rejected or junked by every receiver; the
    operator must hear which newsletter to fix before a single reader is tried."""
    settings = make_settings(database_url, smtp=SMTP, **real_mail(provider="smtp"))
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers, sender_address="ed@localhost")
        await seed(container, "weekly", 1)
        campaign_id = await create_campaign(client, headers)
        refused = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        assert refused.status_code == 409
        assert "sender_address of newsletter 'weekly'" in refused.json()["detail"]
        fixed = await client.patch(
            "/api/admin/newsletters/weekly",
            headers=headers,
            json={"sender_address": "ed@news.example.org"},
        )
        assert fixed.status_code == 200
        sent = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        assert sent.status_code == 202, sent.text


async def test_the_cli_send_names_the_settings_and_exits_2(database_url: str) -> None:
    """An operator sending from a terminal gets one clear line saying what to set, not a
    traceback, and exit code 2 like any configuration error."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        campaign_id = await create_campaign(client, headers)
    tidings = tidings_cli(database_url, TIDINGS_EMAIL_PROVIDER="smtp")
    result = await asyncio.to_thread(tidings, "campaign", "send", str(campaign_id), "--yes")
    assert result.returncode == 2, result.stderr
    message = " ".join(result.stderr.split())
    for key in DEFAULT_KEYS:
        assert key in message
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("overrides", "left"),
    [
        ({}, DEFAULT_KEYS),
        ({"theme": {"postal_address": "1 Quay St"}}, DEFAULT_KEYS[1:]),
        (
            real_mail(provider="smtp"),
            (),
        ),
    ],
)
def test_placeholder_identity_names_exactly_the_defaults(
    overrides: dict[str, Any], left: tuple[str, ...]
) -> None:
    """The refusal must name what is still unset and nothing the operator already changed."""
    found = placeholder_identity(load_settings(**overrides))
    assert tuple(key.split()[0] for key in found) == left


@pytest.mark.parametrize(
    ("address", "placeholder"),
    [
        ("news@localhost", True),
        ("news@LOCALHOST.", True),
        ("a@b", True),
        ("x@mail.invalid", True),
        ("ed@example.org", False),
        ("desk@news.example.co.uk", False),
    ],
)
def test_placeholder_addresses(address: str, placeholder: bool) -> None:
    """Only names no mail can come from count as placeholders; real domains pass."""
    assert is_placeholder_address(address) is placeholder


@pytest.mark.parametrize(("provider", "warned"), [("smtp", True), ("capture", False)])
async def test_a_worker_under_the_placeholder_identity_warns_at_start(
    database_url: str, provider: str, warned: bool
) -> None:
    """Confirmation emails still go out (a reader asked for them), so an operator reading the
    worker's log must learn at start that real mail carries placeholder settings."""
    settings = make_settings(database_url, email={"provider": provider}, smtp=SMTP)
    container = build(settings)
    try:
        await start(container, apply_migrations=True)
        stop = asyncio.Event()
        stop.set()  # start, warn, and stop at once
        with capture_logs() as logs:
            await container.run_workers(stop)
    finally:
        await container.close()
    warnings = [entry for entry in logs if entry["event"] == "config.placeholder_identity"]
    if not warned:
        assert warnings == []
        return
    (warning,) = warnings
    assert warning["log_level"] == "warning"
    assert tuple(warning["settings"]) == DEFAULT_KEYS
