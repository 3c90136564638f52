"""The email provider's connection checked from the API and the dashboard's "Test connection"
button (issue 23, item 4): an operator who set the wrong port learns it from the dashboard, at
the step it failed, before a campaign waits on it."""

from __future__ import annotations

import socket
from typing import Any

from tests.factories import admin_headers, api_client, make_settings, real_mail
from tests.support.admin_ui import signed_in, ui_app
from tidings.bootstrap import utcnow
from tidings.devservers.sink import SmtpSink


def _smtp_settings(database_url: str, port: int) -> Any:
    return make_settings(
        database_url,
        **real_mail(provider="smtp"),
        smtp={"host": "127.0.0.1", "port": port, "security": "none", "timeout_seconds": 5},
    )


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_the_api_reports_each_step_of_the_configured_relay(database_url: str) -> None:
    """Scripts and the UI read the same answer: every step with what the relay said."""
    async with SmtpSink(clock=utcnow) as sink:
        async with api_client(_smtp_settings(database_url, sink.port)) as (client, container):
            headers = await admin_headers(container)
            answer = await client.post("/api/admin/provider/check", headers=headers)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["provider"] == "smtp"
        assert body["ok"] is True
        assert [step["name"] for step in body["steps"]] == ["connect", "ehlo"]
        assert sink.messages == []  # a check sends nothing


async def test_capture_has_nothing_to_connect_to(database_url: str) -> None:
    """The zero-configuration provider must not look broken: it is ok, with no steps."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        body = (await client.post("/api/admin/provider/check", headers=headers)).json()
        unauthenticated = await client.post("/api/admin/provider/check")
    assert (body["provider"], body["ok"], body["steps"]) == ("capture", True, [])
    assert unauthenticated.status_code == 401


async def test_the_dashboard_button_names_the_step_that_failed(database_url: str) -> None:
    """The commonest go-live mistake, a wrong port, is shown on the first page at the step it
    happened, with the relay's host and port."""
    port = _closed_port()
    async with ui_app(_smtp_settings(database_url, port)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        dashboard = await client.get("/admin")
        assert "Test connection" in dashboard.text
        checked = await client.post("/admin/provider-check", data={"csrf_token": csrf})
        forged = await client.post("/admin/provider-check", data={"csrf_token": "forged"})
    assert checked.status_code == 200
    assert f"SMTP 127.0.0.1:{port} (none): failed at connect." in checked.text
    assert "connection refused" in checked.text
    assert forged.status_code == 403
