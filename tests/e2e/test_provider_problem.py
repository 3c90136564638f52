"""A failing provider is visible within a minute (SND-26): with the SMTP relay unreachable, a
send's status (API, `campaign status`), its page and the dashboard name the relay, the error,
the attempts and the next try — instead of "submitting… estimating…" for hours."""

from __future__ import annotations

import asyncio
import socket

import pytest

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, make_settings, real_mail
from tests.support.admin_ui import signed_in, ui_app
from tests.support.cli import clean_env, tidings
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    seed,
    wait_for,
    workers,
)
from tidings.devservers.dev_faults import Fault
from tidings.devservers.dev_server import DevProviderServer
from tidings.domain.provider_health import provider_problem, unreachable_reason


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_an_unreachable_relay_is_named_in_status_page_and_dashboard(
    database_url: str,
) -> None:
    """The commonest go-live mistake (a wrong relay host or port) must be on screen within a
    minute, with what is being done about it, and lose nobody."""
    port = _closed_port()
    settings = make_settings(
        database_url,
        queue={
            **FAST_QUEUE,
            "backoff_base_seconds": 60,
            "backoff_max_seconds": 120,
            "max_attempts": 12,
        },
        smtp={"host": "127.0.0.1", "port": port, "security": "none"},
        **real_mail(provider="smtp"),
    )
    async with ui_app(settings) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 6)
        campaign_id = await create_campaign(client, headers)
        sent = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        assert sent.status_code == 202, sent.text
        async with workers(container):

            async def named() -> object:
                return (await container.send_status.status(campaign_id)).provider_problem

            await wait_for(named, within_seconds=60)
        # Read again once the workers stopped: the retry's jitter may have run another try.
        problem = (await container.send_status.status(campaign_id)).provider_problem
        assert problem is not None
        assert (problem.provider, problem.endpoint) == ("smtp", f"127.0.0.1:{port}")
        assert problem.error  # the error's class, e.g. ConnectionRefusedError
        assert problem.attempts >= 1
        assert problem.max_attempts == 12
        assert problem.next_try is not None
        summary = problem.summary()
        assert summary.startswith(f"SMTP 127.0.0.1:{port} unreachable (")
        assert f"retrying, attempt {problem.attempts} of 12, next try" in summary

        status = await client.get(f"/api/admin/campaigns/{campaign_id}/status", headers=headers)
        body = status.json()["provider_problem"]
        assert body["endpoint"] == f"127.0.0.1:{port}"
        assert (body["attempts"], body["summary"]) == (problem.attempts, summary)
        page = await client.get(f"/admin/campaigns/{campaign_id}")
        assert summary in page.text
        dashboard = await client.get("/admin")
        assert summary in dashboard.text
        assert f"/admin/campaigns/{campaign_id}" in dashboard.text
        assert csrf

        env = clean_env(DATABASE_URL=settings.database.url)
        ran = await asyncio.to_thread(tidings, "campaign", "status", str(campaign_id), env=env)
        # The console wraps long lines.
        assert f"SMTP 127.0.0.1:{port} unreachable" in " ".join(ran.output.split())
        states = (await container.send_status.status(campaign_id)).recipients
        assert states.sent == states.failed == states.uncertain == 0  # nobody lost


def test_the_reason_a_job_records_reads_back_as_the_problem() -> None:
    """The reason written by the hand-over and the problem read for the status are one format:
    a relay with no port known still reads back, and any other error is no provider problem."""
    reason = unreachable_reason("smtp", "relay.example.net:587", "SMTPConnectError")
    found = provider_problem(reason, attempts=5, max_attempts=12, next_try=None)
    assert found is not None
    assert found.summary() == (
        "SMTP relay.example.net:587 unreachable (SMTPConnectError) — retrying, attempt 5 of 12"
    )
    unknown = provider_problem(
        unreachable_reason("relay", None, "unreachable"), attempts=1, max_attempts=3, next_try=None
    )
    assert unknown is not None
    assert unknown.endpoint is None
    assert (
        provider_problem("smtp deferred 3 recipient(s)", attempts=1, max_attempts=3, next_try=None)
        is None
    )
    assert provider_problem(None, attempts=1, max_attempts=3, next_try=None) is None


async def test_a_test_send_reports_what_happened_not_what_was_asked(sqlite_url: str) -> None:
    """ "Test sent" while the message sits queued and failing sends the operator live with a
    broken relay: the page must wait for the outcome and name the failure, or say that no
    worker has taken it yet."""
    port = _closed_port()
    settings = make_settings(
        sqlite_url,
        queue={**FAST_QUEUE, "backoff_base_seconds": 60, "backoff_max_seconds": 120},
        smtp={"host": "127.0.0.1", "port": port, "security": "none"},
        **real_mail(provider="smtp"),
    )
    async with ui_app(settings) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        campaign_id = await create_campaign(client, headers)
        form = {"to": "me@example.org", "segment": "free", "csrf_token": csrf}
        url = f"/admin/campaigns/{campaign_id}/test-send"
        async with workers(container):
            failing = await client.post(url, data=form)

            args = ["campaign", "test-send", str(campaign_id), "--to", "me@example.org"]
            env = clean_env(DATABASE_URL=settings.database.url)
            # On a thread: the workers of this event loop carry the test send meanwhile.
            ran = await asyncio.to_thread(tidings, *args, "--wait", "10", env=env)
            cli_code, cli_output = ran.returncode, " ".join(ran.output.split())
        assert cli_code == 1
        assert f"smtp 127.0.0.1:{port} unreachable" in cli_output
        text = " ".join(failing.text.split())
        assert "Test sent" not in text
        assert f"smtp 127.0.0.1:{port} unreachable" in text
        assert "tried again" in text
        queued = await client.post(url, data=form)  # no worker running now
        assert "Test sent" not in queued.text
        assert "no worker has sent it yet" in queued.text


@pytest.mark.parametrize("failure", ["refused", "503"])
async def test_a_failing_batch_provider_is_named_like_the_relay(
    database_url: str, dev_provider: DevProviderServer, failure: str
) -> None:
    """A Mailgun-compatible API that cannot be reached (a wrong base URL) or answers 5xx must
    be on screen as an unreachable relay is — status, page and dashboard — losing nobody."""
    if failure == "refused":
        base_url, expected = f"http://127.0.0.1:{_closed_port()}", "unreachable (ConnectError)"
    else:
        dev_provider.faults.replace([Fault(action="status", status=503)])
        base_url, expected = dev_provider.base_url, "failing (reply 503)"
    endpoint = base_url.removeprefix("http://").rstrip("/")
    settings = make_settings(
        database_url,
        queue={**FAST_QUEUE, "backoff_base_seconds": 60, "backoff_max_seconds": 120},
        **real_mail(provider="mailgun"),
        mailgun={"api_key": "key-test", "domain": "mg.example.org", "api_base_url": base_url},
    )
    async with ui_app(settings) as (browser, container):
        client = browser()
        await signed_in(client, container)
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 6)
        campaign_id = await create_campaign(client, headers)
        sent = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        assert sent.status_code == 202, sent.text
        async with workers(container):

            async def named() -> object:
                return (await container.send_status.status(campaign_id)).provider_problem

            await wait_for(named, within_seconds=60)
        problem = (await container.send_status.status(campaign_id)).provider_problem
        assert problem is not None
        assert (problem.provider, problem.endpoint) == ("mailgun", endpoint)
        summary = problem.summary()
        assert summary.startswith(f"MAILGUN {endpoint} {expected} — retrying, attempt ")
        body = (
            await client.get(f"/api/admin/campaigns/{campaign_id}/status", headers=headers)
        ).json()
        assert body["provider_problem"]["summary"] == summary
        assert summary in (await client.get(f"/admin/campaigns/{campaign_id}")).text
        assert summary in (await client.get("/admin")).text
        states = (await container.send_status.status(campaign_id)).recipients
        assert states.sent == states.failed == states.uncertain == 0  # nobody lost
