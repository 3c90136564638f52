"""A provider's connection checked step by step (issue 23, item 4): the commonest go-live
mistakes — a wrong port, a host that accepts TCP and never greets, a relay without STARTTLS, a
refused login, a wrong API key or domain — are each named at the step where they happen, against
real servers on loopback (an aiosmtpd sink, the dev provider)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.support.cli import clean_env, tidings
from tests.support.tls import client_context, self_signed_certificate, server_context
from tidings.bootstrap import utcnow
from tidings.delivery.connection_check import ConnectionCheck, check_mailgun, check_smtp
from tidings.devservers.dev_server import DevProviderServer, run_dev_provider
from tidings.devservers.sink import SmtpSink

USER, PASSWORD = "relay-user", "s3cret"


def _steps(check: ConnectionCheck) -> list[tuple[str, bool]]:
    return [(step.name, step.ok) for step in check.steps]


async def _check(port: int, **options: object) -> ConnectionCheck:
    settings: dict[str, object] = {
        "host": "127.0.0.1",
        "port": port,
        "security": "none",
        "username": None,
        "password": None,
        "timeout_seconds": 5.0,
        **options,
    }
    return await check_smtp(**settings)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed_certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture
async def authenticating_sink(certificate: tuple[Path, Path]) -> AsyncIterator[SmtpSink]:
    sink = SmtpSink(
        clock=utcnow, tls_context=server_context(certificate), credentials=(USER, PASSWORD)
    )
    async with sink:
        yield sink


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A host that accepts the connection and never says a word (a wrong service, a tarpit)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_every_step_passes_against_a_relay_with_starttls_and_login(
    authenticating_sink: SmtpSink, certificate: tuple[Path, Path]
) -> None:
    """The check walks what a real send does before MAIL: an operator sees the relay greet,
    upgrade to verified TLS and accept the login — and nothing is sent."""
    check = await _check(
        authenticating_sink.port,
        security="starttls",
        username=USER,
        password=PASSWORD,
        tls_context=client_context(certificate),
    )
    assert _steps(check) == [("connect", True), ("ehlo", True), ("starttls", True), ("login", True)]
    assert check.ok
    assert "certificate verified" in check.steps[2].detail
    assert authenticating_sink.messages == []


async def test_a_refused_login_is_named_with_the_relays_reply(
    authenticating_sink: SmtpSink, certificate: tuple[Path, Path]
) -> None:
    """A wrong password is the commonest relay mistake; the reply code says it is the login."""
    check = await _check(
        authenticating_sink.port,
        security="starttls",
        username=USER,
        password="wrong",
        tls_context=client_context(certificate),
    )
    assert _steps(check)[-1] == ("login", False)
    assert "535" in check.steps[-1].detail
    assert not check.ok


async def test_a_relay_without_starttls_stops_at_that_step() -> None:
    """With smtp.security = starttls a relay that offers no STARTTLS must not be logged in to in
    the clear; the check says which setting to look at."""
    async with SmtpSink(clock=utcnow) as plain:
        check = await _check(plain.port, security="starttls", username=USER, password=PASSWORD)
    assert _steps(check) == [("connect", True), ("ehlo", True), ("starttls", False)]
    assert "smtp.security" in check.steps[-1].detail


async def test_a_host_that_never_greets_and_a_closed_port_are_told_apart(silent_port: int) -> None:
    """ "Unreachable" is two different mistakes: nothing listening (a wrong port), or something
    listening that is not a relay or never answers (a firewall, the wrong service)."""
    silent = await _check(silent_port, timeout_seconds=0.5)
    closed = await _check(_closed_port())
    assert _steps(silent) == _steps(closed) == [("connect", False)]
    assert "no greeting within 0.5 s" in silent.steps[0].detail
    assert "connection refused" in closed.steps[0].detail


@pytest.fixture
async def keyed_provider() -> AsyncIterator[DevProviderServer]:
    async with run_dev_provider(api_key="key-right") as server:
        yield server


async def test_the_api_key_and_domain_are_checked_against_the_api(
    keyed_provider: DevProviderServer,
) -> None:
    """The batch provider's credentials are checked with a read, so a wrong key is found before
    a campaign's first batch fails on it."""
    base = keyed_provider.base_url

    async def check(key: str) -> ConnectionCheck:
        return await check_mailgun(
            api_key=key, domain="mg.example.org", base_url=base, timeout_seconds=5
        )

    good, bad = await asyncio.gather(check("key-right"), check("key-wrong"))
    assert good.ok
    assert "mg.example.org found, state active" in good.steps[0].detail
    assert not bad.ok
    assert "401" in bad.steps[0].detail
    assert "mailgun.api_key" in bad.steps[0].detail
    unreachable = await check_mailgun(
        api_key="k", domain="mg.example.org", base_url=f"http://127.0.0.1:{_closed_port()}",
        timeout_seconds=5,
    )  # fmt: skip
    assert not unreachable.ok
    assert "cannot connect" in unreachable.steps[0].detail


def test_smtp_check_command_reports_each_step_and_its_exit_code(silent_port: int) -> None:
    """`tidings smtp check` is what the docs tell an operator to run first: exit 1 and the
    failed step when the relay is wrong; --json for scripts."""
    env = clean_env(SMTP_HOST="127.0.0.1", SMTP_PORT=str(silent_port), SMTP_TIMEOUT_SECONDS="0.5")
    shown = tidings("smtp", "check", env=env)
    assert shown.returncode == 1
    assert f"127.0.0.1:{silent_port} (starttls)" in shown.stdout
    assert "✗ connect: no greeting within 0.5 s" in shown.stdout
    answer = json.loads(tidings("smtp", "check", "--json", env=env).stdout)
    assert answer["ok"] is False
    assert [step["name"] for step in answer["steps"]] == ["connect"]


def test_mailgun_check_without_a_key_names_the_setting() -> None:
    """A check cannot run without credentials; it says which setting is missing (exit 2, as
    every configuration problem does)."""
    result = tidings("mailgun", "check", env=clean_env(MAILGUN_DOMAIN="mg.example.org"))
    assert result.returncode == 2
    assert "mailgun.api_key is not set" in result.stderr
