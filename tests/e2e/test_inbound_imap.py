"""The bounce mailbox, polled over IMAP (PRV-6): for an MX that cannot reach `tidings inbound`,
the same DSNs and complaints are read from a mailbox (aioimaplib's own IMAP test server, a
real server on loopback) and each message is deleted there once recorded."""

from __future__ import annotations

import asyncio
import email
import json
from email.message import Message

from aioimaplib.imap_testing_server import Mail, MockImapServer
from sqlalchemy import select

from tests.e2e.test_inbound_mail import BOUNCES, arf, dsn, outcome_of, reader, staged
from tests.support.cli import clean_env, tidings
from tidings.storage.tables import inbound_events

USER = "bounces"


async def test_a_polled_bounce_mailbox_is_acted_on_and_emptied(database_url: str) -> None:
    """A hard bounce to the VERP return path and a complaint found in the mailbox suppress
    their readers as if delivered by SMTP; unreadable mail is kept for the operator; every
    message is gone from the mailbox once recorded, and polling again changes nothing."""
    async with staged(database_url) as stage:
        imap = MockImapServer()
        listener = await imap.run_server(host="127.0.0.1", port=0)
        port = listener.sockets[0].getsockname()[1]
        original = stage.sent[reader(1)]
        garbage = Message()
        garbage["To"] = BOUNCES
        garbage["Subject"] = "Out of office"
        garbage.set_payload("I am away until Monday.")
        for data in (
            dsn(original, reader(1), "5.1.1", "550 5.1.1 user unknown"),
            arf(reader(3), stage.sent[reader(3)]),
            garbage.as_bytes(),
        ):
            imap.receive(Mail(email.message_from_bytes(data)), imap_user=USER)
        env = clean_env(
            DATABASE_URL=database_url,
            INBOUND_BOUNCE_ADDRESS=BOUNCES,
            INBOUND_IMAP_HOST="127.0.0.1",
            INBOUND_IMAP_PORT=str(port),
            INBOUND_IMAP_TLS="false",
            INBOUND_IMAP_USER=USER,
            INBOUND_IMAP_PASSWORD="mailbox-password",
        )
        try:
            first = await asyncio.to_thread(tidings, "inbound", "--imap", "--once", env=env)
            again = await asyncio.to_thread(tidings, "inbound", "--imap", "--once", env=env)
            left = imap._server_state.get_mailbox_messages(USER, "INBOX")
        finally:
            listener.close()
            await listener.wait_closed()
        assert first.returncode == 0, first.output
        assert json.loads(first.stdout.strip().splitlines()[-1]) == {
            "applied": 2,
            "unparsed": 1,
        }
        assert left == []
        assert json.loads(again.stdout.strip().splitlines()[-1]) == {}
        assert await outcome_of(stage, reader(1)) == ("hard_bounce", "hard", "5.1.1")
        assert (await outcome_of(stage, reader(3)))[0] == "complaint"
        assert (await outcome_of(stage, reader(2)))[0] is None
        async with stage.container.db.read() as conn:
            kept = (
                await conn.execute(
                    select(inbound_events.c.payload).where(inbound_events.c.status == "unparsed")
                )
            ).scalars()
            assert any("I am away until Monday." in (payload or "") for payload in kept)


async def test_polling_without_a_mailbox_says_which_settings_to_set(database_url: str) -> None:
    """An operator who asks for --imap without configuring it gets the settings' names."""
    env = clean_env(DATABASE_URL=database_url, INBOUND_BOUNCE_ADDRESS=BOUNCES)
    result = await asyncio.to_thread(tidings, "inbound", "--imap", "--once", env=env)
    assert result.returncode == 2
    assert "inbound.imap_host" in result.output
