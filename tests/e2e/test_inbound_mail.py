"""The SMTP path hears back (PRV-6): campaign mail sent by SMTP carries a VERP return path, and
`tidings inbound` (a real aiosmtpd server on loopback) reads what comes back — RFC 3464 DSNs,
a qmail bounce with no VERP tag, an RFC 5965 complaint, mail to the List-Unsubscribe mailto
address — and keeps what it cannot read."""

from __future__ import annotations

import asyncio
import smtplib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from email.message import EmailMessage

import aiosmtplib
import pytest
from sqlalchemy import select

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings, real_mail
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    registry,
    running,
    seed,
    wait_for,
    wait_for_campaign_status,
)
from tidings.bootstrap import Container, utcnow
from tidings.delivery.inbound_server import InboundServer
from tidings.devservers import dev_reports
from tidings.devservers.dev_reports import ReportSender
from tidings.devservers.sink import ReceivedMessage, SmtpSink
from tidings.storage.tables import (
    campaign_recipients,
    inbound_events,
    subscribers,
    subscriptions,
    suppressions,
)

BOUNCES = "bounces@mail.example.org"
UNSUBSCRIBE = "unsubscribe@mail.example.org"


@dataclass
class Stage:
    container: Container
    campaign_id: int
    sent: dict[str, ReceivedMessage]  # by reader address
    server: InboundServer
    sink: SmtpSink


@asynccontextmanager
async def staged(
    database_url: str,
    *,
    readers: tuple[str, ...] = (),
    reports: bool = False,
    inbound: dict[str, object] | None = None,
) -> AsyncIterator[Stage]:
    """Four readers (and `readers`) sent one campaign through an SMTP relay (the sink), with
    `tidings inbound`'s receiver listening for what comes back; with `reports`, the sink
    mails bounces and complaints back to it as a relay and a feedback loop would. `inbound`:
    more inbound.* settings."""
    async with SmtpSink(clock=utcnow) as sink:
        settings = make_settings(
            database_url,
            queue=FAST_QUEUE,
            **real_mail(provider="smtp", unsubscribe_address=UNSUBSCRIBE),
            smtp={"host": "127.0.0.1", "port": sink.port, "security": "none"},
            inbound={"bounce_address": BOUNCES, **(inbound or {})},
        )
        async with api_client(settings) as (client, container):
            headers = await admin_headers(container)
            await create_newsletter(client, headers)
            await seed(container, "weekly", 4)
            for address in readers:
                body = {
                    "email": address,
                    "subscriptions": [{"newsletter": "weekly", "confirmed": True}],
                }
                assert (
                    await client.post("/api/admin/subscribers", json=body, headers=headers)
                ).is_success
            mail = container.inbound_mail
            async with InboundServer(
                accepts=mail.accepts, deliver=mail.receive, max_bytes=mail.max_bytes
            ) as server:
                reporter = ReportSender("127.0.0.1", server.port)
                if reports:
                    sink.on_message = reporter.on_message
                campaign_id = await create_campaign(client, headers)
                response = await client.post(
                    f"/api/admin/campaigns/{campaign_id}/send", headers=headers
                )
                assert response.status_code == 202, response.text
                async with running(container, registry(container)):
                    assert await wait_for_campaign_status(container, campaign_id) == "submitted"
                await reporter.drain()
                sent = {message.recipients[0]: message for message in sink.messages}
                yield Stage(container, campaign_id, sent, server, sink)


@pytest.fixture
async def stage(database_url: str) -> AsyncIterator[Stage]:
    async with staged(database_url) as found:
        yield found


def reader(number: int) -> str:
    return f"reader-{number}@example.test"


async def deliver(
    stage: Stage, mail_to: str, message: EmailMessage | bytes, *, lmtp: bool = False
) -> dict[str, tuple[int, bytes]]:
    """Hand `message` to the receiver as an MTA would; the refused recipients and replies."""
    data = message if isinstance(message, bytes) else message.as_bytes()

    def send() -> dict[str, tuple[int, bytes]]:
        client_class = smtplib.LMTP if lmtp else smtplib.SMTP
        with client_class("127.0.0.1", stage.server.port, timeout=10) as client:
            return client.sendmail("MAILER-DAEMON@mx.example.net", [mail_to], data)

    return await asyncio.to_thread(send)


def dsn(original: ReceivedMessage, failed: str, status: str, diagnostic: str) -> bytes:
    """An RFC 3464 DSN for `original`, as the dev SMTP sink sends one."""
    return dev_reports.dsn(
        original.data, to=original.mail_from, failed=failed, status=status, diagnostic=diagnostic
    )


def arf(complainant: str | None, original: ReceivedMessage, *, verp: bool = True) -> bytes:
    """An RFC 5965 abuse report, sent to the bare bounce address (no VERP tag) as feedback
    loops send them, quoting the original with the Return-Path its mailbox added (the VERP
    address); `verp` False: a report quoting no return path (a Message-ID alone)."""
    return_path = original.mail_from if verp else None
    return dev_reports.arf(
        original.data, to=BOUNCES, complainant=complainant, return_path=return_path
    )


async def outcome_of(stage: Stage, address: str) -> tuple[str | None, str | None, str | None]:
    """(suppression reason, bounce kind, bounce code) of a reader."""
    async with stage.container.db.read() as conn:
        subscriber = (
            await conn.execute(select(subscribers).where(subscribers.c.email == address))
        ).one()
        reason = (
            await conn.execute(
                select(suppressions.c.reason).where(
                    suppressions.c.email_hash == subscriber.email_hash
                )
            )
        ).scalar()
        row = (
            await conn.execute(
                select(campaign_recipients).where(
                    campaign_recipients.c.campaign_id == stage.campaign_id,
                    campaign_recipients.c.subscriber_id == subscriber.id,
                )
            )
        ).one()
    return reason, row.bounce_kind, row.bounce_code


async def test_campaign_mail_carries_a_return_path_naming_its_recipient(stage: Stage) -> None:
    """Without VERP a bounce that quotes no readable address is lost (PRV-6)."""
    senders = {message.mail_from for message in stage.sent.values()}
    assert len(senders) == 4
    assert all(
        sender.startswith("bounces+") and sender.endswith("@mail.example.org") for sender in senders
    )


async def test_a_dsn_to_the_return_path_suppresses_the_reader_it_names(stage: Stage) -> None:
    """The relay's RFC 3464 DSN comes back to the VERP address: the row it names bounces hard
    with the DSN's status, even though the DSN names a forwarded address."""
    original = stage.sent[reader(1)]
    replies = await deliver(
        stage,
        original.mail_from,
        dsn(original, "old-address@forwarded.example", "5.1.1", "550 5.1.1 user unknown"),
    )
    assert replies == {}
    assert await outcome_of(stage, reader(1)) == ("hard_bounce", "hard", "5.1.1")
    assert (await outcome_of(stage, reader(2)))[0] is None


def qmail_bounce(failed: str) -> EmailMessage:
    """A bounce in qmail's own format, to the bare bounce address, as some MTAs send."""
    bounce = EmailMessage()
    bounce["From"] = "MAILER-DAEMON@qmail.example.net"
    bounce["To"] = BOUNCES
    bounce["Subject"] = "failure notice"
    bounce["Message-ID"] = "<qmail-1@qmail.example.net>"
    bounce.set_content(
        "Hi. This is the qmail-send program at qmail.example.net.\n"
        "I'm afraid I wasn't able to deliver your message to the following addresses.\n"
        "This is a permanent error; I've given up. Sorry it didn't work out.\n\n"
        f"<{failed}>:\nSorry, no mailbox here by that name. (#5.1.1)\n\n"
        "--- Below this line is a copy of the message.\n"
    )
    return bounce


async def test_a_bounce_without_a_tag_is_matched_by_the_failed_address_on_a_closed_relay(
    database_url: str,
) -> None:
    """An operator whose relay alone can reach `tidings inbound` may act on bounces to the
    bare address (inbound.act_on_unverified_reports): the failed address, read by
    flufl.bounce, finds the reader."""
    trusted = {"act_on_unverified_reports": True}
    async with staged(database_url, inbound=trusted) as stage:
        await deliver(stage, BOUNCES, qmail_bounce(reader(2)))
        assert (await outcome_of(stage, reader(2)))[0] == "hard_bounce"


async def test_a_transient_dsn_counts_as_a_soft_bounce(stage: Stage) -> None:
    """A full mailbox is counted, not punished at once (AUD-13); LMTP works like SMTP."""
    original = stage.sent[reader(4)]
    await deliver(
        stage,
        original.mail_from,
        dsn(original, reader(4), "4.2.2", "452 4.2.2 mailbox full"),
        lmtp=False,
    )
    assert await outcome_of(stage, reader(4)) == (None, "soft", "4.2.2")


async def test_an_arf_complaint_suppresses_and_unsubscribes(stage: Stage) -> None:
    """A feedback-loop report is a complaint: suppressed, and out of every newsletter."""
    await deliver(stage, BOUNCES, arf(reader(3), stage.sent[reader(3)]))
    assert (await outcome_of(stage, reader(3)))[0] == "complaint"


async def test_mail_to_the_unsubscribe_address_unsubscribes_once(stage: Stage) -> None:
    """List-Unsubscribe's mailto must work (AUD-7): the token in the subject is enough, no
    reply is needed, and the same mail twice changes nothing more."""
    header = stage.sent[reader(1)].data.split(b"\r\n\r\n", 1)[0].decode()
    unfolded = header.replace("\r\n ", " ")
    subject = unfolded.split("mailto:" + UNSUBSCRIBE + "?subject=", 1)[1].split(">", 1)[0]
    request = EmailMessage()
    request["From"] = reader(1)
    request["To"] = UNSUBSCRIBE
    request["Subject"] = subject
    request.set_content("")
    for _ in range(2):
        await deliver(stage, UNSUBSCRIBE, request)
    async with stage.container.db.read() as conn:
        query = (
            select(subscriptions.c.unsubscribed_at, subscriptions.c.unsubscribe_count)
            .join(subscribers, subscribers.c.id == subscriptions.c.subscriber_id)
            .where(subscribers.c.email == reader(1))
        )
        [(unsubscribed_at, count)] = (await conn.execute(query)).all()
    assert unsubscribed_at is not None
    assert count == 1


async def test_unreadable_mail_is_kept_and_strangers_are_refused(stage: Stage) -> None:
    """An out-of-office reply or garbage must not crash the receiver nor be lost; mail for
    other addresses is refused at RCPT, and the LMTP dialect answers too."""
    reply = EmailMessage()
    reply["From"] = "someone@example.test"
    reply["To"] = BOUNCES
    reply["Subject"] = "Out of office"
    reply.set_content("I am away until Monday.")
    assert await deliver(stage, BOUNCES, reply) == {}
    assert await deliver(stage, BOUNCES, b"\x00\xff not a message at all\r\n") == {}
    with pytest.raises(smtplib.SMTPRecipientsRefused):
        await deliver(stage, "postmaster@mail.example.org", reply)
    async with stage.container.db.read() as conn:
        kept = list(
            (
                await conn.execute(
                    select(inbound_events.c.diagnostic)
                    .where(inbound_events.c.status == "unparsed")
                    .order_by(inbound_events.c.id)
                )
            ).scalars()
        )
        suppressed = (await conn.execute(select(suppressions))).all()
    assert len(kept) == 2  # each with the reason it could not be read
    assert kept[0] == "neither a bounce nor a complaint"
    assert suppressed == []
    lmtp = InboundServer(
        accepts=stage.container.inbound_mail.accepts,
        deliver=stage.container.inbound_mail.receive,
        lmtp=True,
    )
    async with lmtp:
        stage.server, previous = lmtp, stage.server
        assert await deliver(stage, BOUNCES, reply, lmtp=True) == {}
        stage.server = previous


async def test_the_dev_smtp_sink_mails_bounces_and_complaints_back(database_url: str) -> None:
    """`tidings dev-smtp --reports-to` plays the relay and the feedback loop: the `bounce-`
    reader is suppressed for a hard bounce and the `complain-` one for a complaint, with no
    provider at all (issue 22, item 6)."""
    readers = ("bounce-bob@example.test", "complain-cy@example.test", "softbounce-di@example.test")
    async with staged(database_url, readers=readers, reports=True) as stage:

        async def settled() -> bool:
            return (await outcome_of(stage, readers[1]))[0] == "complaint"

        await wait_for(settled, within_seconds=10)
        assert (await outcome_of(stage, readers[0]))[:2] == ("hard_bounce", "hard")
        assert (await outcome_of(stage, readers[2]))[:2] == (None, "soft")
        assert (await outcome_of(stage, reader(1)))[0] is None


async def test_stopping_the_receiver_closes_a_connection_an_mta_left_open() -> None:
    """`tidings inbound` stopping (SIGTERM, a deploy) while an MTA sits connected: the
    connection is closed, not left to outlive the server (asyncio's `Server.close` only
    stops listening), and the MTA sees it go."""

    async def refuse(recipients: list[str], data: bytes) -> None:
        raise AssertionError("nothing is delivered in this test")

    server = InboundServer(accepts=lambda address: True, deliver=refuse)
    async with server:
        client = aiosmtplib.SMTP(hostname="127.0.0.1", port=server.port, timeout=10)
        await client.connect()
        await client.ehlo()
        assert server.open_connections == 1
    assert server.open_connections == 0
    with pytest.raises(aiosmtplib.SMTPServerDisconnected):
        await client.noop()
    client.close()
