"""`tidings inbound` as configured (issue 35 items 4 and 8): STARTTLS with the certificate of
inbound.tls_*, and no personal data in its logs (PRI-5) — aiosmtpd writes envelope addresses
at info and every message line at debug unless tidings' logging set-up stops it, and the
command itself logs at warning like the other commands that are not `serve`, `api` or
`worker`.

Each mirrors the outside review's run against `tidings inbound` on loopback: a reader's
List-Unsubscribe mailto request delivered to it, the log read afterwards."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import signal
import smtplib
import subprocess
import sys
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import aiosmtplib
import structlog
from sqlalchemy import select

from tests.factories import admin_headers, api_client, make_settings, real_mail
from tests.support.cli import clean_env
from tests.support.tls import client_context, self_signed_certificate
from tests.support.waiting import wait_until
from tidings.cli.context import free_port
from tidings.domain import tokens
from tidings.observability.logging import configure_logging
from tidings.storage import subscribers as subscriber_queries
from tidings.storage import subscriptions as subscription_queries
from tidings.storage.tables import subscriptions

BOUNCES = "bounces@mail.example.org"
UNSUBSCRIBE = "unsubscribe@mail.example.org"
READER = "Ottilie.Reader@example.org"
RELAY = "postmaster@relay.example.net"


def inbound_settings(database_url: str, **inbound: Any) -> Any:
    return make_settings(
        database_url,
        **real_mail(unsubscribe_address=UNSUBSCRIBE),
        inbound={"bounce_address": BOUNCES, **inbound},
    )


async def reader_with_token(database_url: str) -> str:
    """A confirmed reader of one newsletter; the token their mailto unsubscribe carries."""
    async with api_client(inbound_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        newsletter = {"slug": "weekly", "name": "The Weekly", "sender_name": "Ed"}
        newsletter["sender_address"] = "ed@news.example.org"
        assert (
            await client.post("/api/admin/newsletters", json=newsletter, headers=headers)
        ).is_success
        body = {"email": READER, "subscriptions": [{"newsletter": "weekly", "confirmed": True}]}
        assert (await client.post("/api/admin/subscribers", json=body, headers=headers)).is_success
        async with container.db.read() as conn:
            subscriber = await subscriber_queries.get_by_key(conn, READER.lower())
            assert subscriber is not None
            ((subscription, _, _),) = await subscription_queries.of_subscriber(conn, subscriber.id)
        return tokens.sign(
            container.site_secret(), "unsubscribe", subscription.id, subscription.created_at
        )


def unsubscribe_request(token: str) -> EmailMessage:
    request = EmailMessage()
    request["From"] = READER
    request["To"] = UNSUBSCRIBE
    request["Subject"] = f"unsubscribe-{token}"
    request.set_content("")
    return request


async def unsubscribed(database_url: str) -> bool:
    async with (
        api_client(inbound_settings(database_url)) as (_, container),
        container.db.read() as conn,
    ):
        found = await conn.execute(select(subscriptions.c.unsubscribed_at))
        return found.scalar_one() is not None


async def test_starttls_is_offered_with_the_configured_certificate(
    database_url: str, tmp_path: Path
) -> None:
    """An MX reached over the internet should take mail over TLS: with
    inbound.tls_certificate_file and tls_key_file set, the receiver offers STARTTLS with that
    certificate, and mail delivered over it is handled."""
    certificate = self_signed_certificate(tmp_path)
    token = await reader_with_token(database_url)
    settings = inbound_settings(
        database_url, tls_certificate_file=str(certificate[0]), tls_key_file=str(certificate[1])
    )
    async with (
        api_client(settings) as (_, container),
        container.inbound_server(host="127.0.0.1", port=0, lmtp=False) as server,
    ):
        client = aiosmtplib.SMTP(
            hostname="127.0.0.1",
            port=server.port,
            start_tls=False,
            tls_context=client_context(certificate),
            timeout=10,
        )
        async with client:
            await client.ehlo()
            assert client.supports_extension("starttls")
            await client.starttls()
            assert client.get_transport_info("sslcontext") is not None
            errors, _ = await client.send_message(unsubscribe_request(token), sender=RELAY)
            assert errors == {}
    assert await unsubscribed(database_url)


async def test_no_log_record_of_an_inbound_session_holds_an_address_or_the_token(
    database_url: str,
) -> None:
    """PRI-5: with `--log-level debug`, aiosmtpd logged the envelope addresses (info) and
    every line of the message (debug) — here the reader's address and their unsubscribe
    token — and at warning, the client's address and an unknown command it sent. Every
    record of a whole session, stdlib and structlog alike, must hold none of them."""
    token = await reader_with_token(database_url)
    stream = io.StringIO()
    records: list[logging.LogRecord] = []

    class Everything(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    configure_logging("debug", "json", stream=stream)
    root = logging.getLogger()
    root.addHandler(Everything(logging.DEBUG))
    async with api_client(inbound_settings(database_url)) as (_, container):
        async with container.inbound_server(host="127.0.0.1", port=0, lmtp=False) as server:

            def send() -> dict[str, tuple[int, bytes]]:
                with smtplib.SMTP("127.0.0.1", server.port, timeout=10) as client:
                    client.ehlo("relay.example.net")
                    # aiosmtpd warns of an unknown command, quoting it: here an address.
                    assert client.docmd(READER)[0] == 500
                    return client.sendmail(
                        RELAY, [UNSUBSCRIBE], unsubscribe_request(token).as_bytes()
                    )

            assert await asyncio.to_thread(send) == {}
        structlog.get_logger("tests").debug("tests.debug_probe")
    assert await unsubscribed(database_url)
    written = stream.getvalue()
    assert '"event": "tests.debug_probe"' in written  # debug was really on
    texts = [written] + [record.getMessage() + str(record.__dict__) for record in records]
    for needle in (READER, UNSUBSCRIBE, RELAY, BOUNCES, token):
        assert not [text for text in texts if needle.lower() in text.lower()], needle
    for line in filter(None, written.splitlines()):
        json.loads(line)


def test_tidings_inbound_logs_at_warning_and_writes_no_address(sqlite_url: str) -> None:
    """`tidings inbound` run as an operator runs it wrote aiosmtpd's info lines (the relay's
    address, each envelope address) to its log: like the other commands that are not
    `serve`, `api` or `worker`, it logs at warning unless --log-level says otherwise."""
    token = asyncio.run(reader_with_token(sqlite_url))
    port = free_port()
    env = clean_env(
        DATABASE_URL=sqlite_url,
        LOG_FORMAT="json",
        INBOUND_BOUNCE_ADDRESS=BOUNCES,
        EMAIL_UNSUBSCRIBE_ADDRESS=UNSUBSCRIBE,
        EMAIL_FROM_ADDRESS="desk@news.example.org",
        SITE_PUBLIC_URL="https://news.example.org",
        THEME_POSTAL_ADDRESS="The Test Gazette, 1 Quay Street, Porthaven",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "tidings", "inbound", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def delivered() -> bool:
            assert process.poll() is None, "tidings inbound exited"
            try:
                with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
                    client.sendmail(RELAY, [UNSUBSCRIBE], unsubscribe_request(token).as_bytes())
            except ConnectionRefusedError:
                return False
            return True

        wait_until(delivered, within_seconds=60, message="tidings inbound never listened")
    finally:
        process.send_signal(signal.SIGTERM)
        _, log = process.communicate(timeout=30)
    assert asyncio.run(unsubscribed(sqlite_url))
    events = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert [event for event in events if event.get("level") in ("debug", "info")] == []
    for needle in (READER, RELAY, token):
        assert needle.lower() not in log.lower(), needle
