"""Only an authenticated report acts (PRV-6, issue 35): the MX takes mail from anyone, so a
bounce or complaint by mail suppresses, unsubscribes, marks a recipient or counts toward
auto-pause only when a VERP address whose MAC verifies names the recipient. Everything else is
kept as `unverified` for the operator, who may apply or discard it (audited).

Each test mirrors the outside review's reproduction against `tidings inbound` on loopback: one
forged DSN with 20 blocks, sent to the bare bounce address, suppressed 20 people."""

from __future__ import annotations

import asyncio
import email
from collections.abc import AsyncIterator
from email.message import EmailMessage

import pytest
from sqlalchemy import func, select

from tests.e2e.audience_helpers import create_newsletter
from tests.e2e.test_inbound_mail import (
    BOUNCES,
    UNSUBSCRIBE,
    Stage,
    arf,
    deliver,
    dsn,
    outcome_of,
    qmail_bounce,
    reader,
    staged,
)
from tests.factories import admin_headers, api_client, make_settings, real_mail
from tests.support.admin_ui import signed_in, ui_app
from tests.support.cli import clean_env, tidings
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    seed,
    wait_for_campaign_status,
    workers,
)
from tests.support.waiting import wait_for
from tidings.bootstrap import utcnow
from tidings.delivery.inbound_server import InboundServer
from tidings.devservers.sink import Faults, SmtpSink
from tidings.storage.sending import feedback_counts
from tidings.storage.tables import (
    audit_log,
    campaign_recipients,
    inbound_events,
    subscriptions,
    suppressions,
    transactional_messages,
)

EXTRA = tuple(f"extra-{n}@example.test" for n in range(16))


def forged_dsn(failed: list[str]) -> bytes:
    """One RFC 3464 DSN with a per-recipient block for each address, as anyone can write."""
    blocks = "".join(
        f"Final-Recipient: rfc822; {address}\r\nAction: failed\r\nStatus: 5.1.1\r\n"
        "Diagnostic-Code: smtp; 550 5.1.1 user unknown\r\n\r\n"
        for address in failed
    )
    return (
        "From: MAILER-DAEMON@forger.example\r\nTo: " + BOUNCES + "\r\n"
        "Subject: Undelivered Mail Returned to Sender\r\n"
        "Message-ID: <forged-1@forger.example>\r\nMIME-Version: 1.0\r\n"
        'Content-Type: multipart/report; report-type=delivery-status; boundary="DSN"\r\n\r\n'
        "--DSN\r\nContent-Type: text/plain\r\n\r\nYour message could not be delivered.\r\n"
        "--DSN\r\nContent-Type: message/delivery-status\r\n\r\n"
        "Reporting-MTA: dns; forger.example\r\n\r\n" + blocks + "--DSN--\r\n"
    ).encode()


@pytest.fixture
async def stage(database_url: str) -> AsyncIterator[Stage]:
    async with staged(database_url) as found:
        yield found


async def _nothing_changed(stage: Stage) -> None:
    async with stage.container.db.read() as conn:
        suppressed = (await conn.execute(select(suppressions))).all()
        left = (
            await conn.execute(
                select(subscriptions).where(subscriptions.c.unsubscribed_at.is_not(None))
            )
        ).all()
        marked = (
            await conn.execute(
                select(campaign_recipients).where(campaign_recipients.c.bounce_kind.is_not(None))
            )
        ).all()
        counted = (await feedback_counts.watch(conn, stage.campaign_id)).now
    assert suppressed == []
    assert left == []
    assert marked == []
    assert (counted.hard_bounced, counted.complained) == (0, 0)


async def _kept(stage: Stage) -> list[tuple[int, str | None, str | None]]:
    async with stage.container.db.read() as conn:
        query = (
            select(inbound_events.c.id, inbound_events.c.kind, inbound_events.c.diagnostic)
            .where(inbound_events.c.status == "unverified")
            .order_by(inbound_events.c.id)
        )
        return [(row.id, row.kind, row.diagnostic) for row in await conn.execute(query)]


async def test_a_forged_dsn_to_the_bare_address_suppresses_nobody(database_url: str) -> None:
    """The review's reproduction: one DSN naming 20 readers, mailed to the bare bounce
    address, suppressed all 20. Now it changes nothing and waits for the operator."""
    async with staged(database_url, readers=EXTRA) as stage:
        named = [reader(n) for n in range(1, 5)] + list(EXTRA)
        assert len(named) == 20
        assert await deliver(stage, BOUNCES, forged_dsn(named)) == {}
        await _nothing_changed(stage)
        [(_, kind, reason)] = await _kept(stage)
        assert kind == "hard_bounce"
        assert reason == "unverified: sent to the bare bounce address, with no VERP MAC"


async def test_a_wrong_mac_or_a_message_id_alone_is_unverified(stage: Stage) -> None:
    """A VERP address with a MAC that does not verify, a bounce in a format with no return
    path, and a complaint that names its reader and quotes the right Message-ID (whose formula
    is public) but no VERP return path: none acts."""
    original = stage.sent[reader(1)]
    local, _, domain = original.mail_from.partition("@")
    wrong = local[: -len("0123456789abcdef")] + "0123456789abcdef" + "@" + domain
    assert wrong != original.mail_from
    await deliver(stage, wrong, dsn(original, reader(1), "5.1.1", "550 5.1.1 unknown"))
    await deliver(stage, BOUNCES, qmail_bounce(reader(2)))
    await deliver(stage, BOUNCES, arf(reader(3), stage.sent[reader(3)], verp=False))
    await _nothing_changed(stage)
    kept = await _kept(stage)
    assert [(kind, reason) for _, kind, reason in kept] == [
        ("hard_bounce", "unverified: the VERP address's MAC does not verify"),
        ("hard_bounce", "unverified: sent to the bare bounce address, with no VERP MAC"),
        ("complaint", "unverified: sent to the bare bounce address, with no VERP MAC"),
    ]


async def test_a_complaint_with_its_recipient_redacted_is_matched_by_the_quoted_return_path(
    stage: Stage,
) -> None:
    """Feedback loops redact the complainant; the Return-Path of the message they quote is the
    VERP address, whose MAC names the reader: that reader alone complains."""
    await deliver(stage, BOUNCES, arf(None, stage.sent[reader(3)]))
    assert (await outcome_of(stage, reader(3)))[0] == "complaint"
    assert (await outcome_of(stage, reader(2)))[0] is None
    assert await _kept(stage) == []


async def test_a_verp_address_acts_on_its_own_row_only(stage: Stage) -> None:
    """A reader who got a campaign knows their own VERP address: a DSN they send to it naming
    other readers bounces only themselves."""
    original = stage.sent[reader(1)]
    forged = forged_dsn([reader(2), reader(3)])
    await deliver(stage, original.mail_from, forged)
    assert (await outcome_of(stage, reader(1)))[0] == "hard_bounce"
    assert (await outcome_of(stage, reader(2)))[0] is None
    assert (await outcome_of(stage, reader(3)))[0] is None


async def test_the_operator_applies_or_discards_an_unverified_report(stage: Stage) -> None:
    """An operator who knows a report is genuine applies it (the readers it names bounce);
    another is discarded; each is done once, and both are in the audit log."""
    await deliver(stage, BOUNCES, qmail_bounce(reader(2)))
    await deliver(stage, BOUNCES, forged_dsn([reader(4)]))
    [(applied_id, _, _), (discarded_id, _, _)] = await _kept(stage)
    container = stage.container
    async with api_client(container.settings) as (client, second):
        headers = await admin_headers(second)
        listed = await client.get(
            "/api/admin/events",
            params={"status": "unverified", "awaiting_review": "true"},
            headers=headers,
        )
        assert [item["id"] for item in listed.json()["items"]] == [discarded_id, applied_id]
        answer = await client.post(f"/api/admin/events/{applied_id}/apply", headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"outcomes": ["applied"]}
        again = await client.post(f"/api/admin/events/{applied_id}/apply", headers=headers)
        assert again.status_code == 404
        assert again.headers["content-type"].startswith("application/problem+json")
        dropped = await client.post(f"/api/admin/events/{discarded_id}/discard", headers=headers)
        assert dropped.status_code == 200, dropped.text
        waiting = await client.get(
            "/api/admin/events", params={"awaiting_review": "true"}, headers=headers
        )
        assert waiting.json()["items"] == []
    assert (await outcome_of(stage, reader(2)))[0] == "hard_bounce"
    assert (await outcome_of(stage, reader(4)))[0] is None
    async with container.db.read() as conn:
        audited = (
            await conn.execute(
                select(audit_log.c.action, audit_log.c.target).order_by(audit_log.c.id)
            )
        ).all()
        reviewed = (
            await conn.execute(
                select(inbound_events.c.reviewed)
                .where(inbound_events.c.status == "unverified")
                .order_by(inbound_events.c.id)
            )
        ).scalars()
        assert list(reviewed) == ["applied", "discarded"]
    assert ("inbound.apply", f"inbound:{applied_id}") in audited
    assert ("inbound.discard", f"inbound:{discarded_id}") in audited


async def test_tidings_inbound_list_and_apply_review_from_the_command_line(
    database_url: str,
) -> None:
    """The operator without the admin open: `tidings inbound list` shows what waits, `apply`
    acts on it (audited), and it no longer waits."""
    async with staged(database_url) as stage:
        await deliver(stage, BOUNCES, qmail_bounce(reader(2)))
        [(event_id, _, _)] = await _kept(stage)
        env = clean_env(DATABASE_URL=database_url, INBOUND_BOUNCE_ADDRESS=BOUNCES)
        listed = await asyncio.to_thread(tidings, "inbound", "list", "--json", env=env)
        assert listed.returncode == 0, listed.output
        assert '"status": "unverified"' in listed.stdout
        assert f'"id": {event_id}' in listed.stdout
        applied = await asyncio.to_thread(tidings, "inbound", "apply", str(event_id), env=env)
        assert applied.returncode == 0, applied.output
        assert (await outcome_of(stage, reader(2)))[0] == "hard_bounce"
        after = await asyncio.to_thread(tidings, "inbound", "list", "--json", env=env)
        assert after.stdout.strip() == "[]"
        twice = await asyncio.to_thread(tidings, "inbound", "discard", str(event_id), env=env)
        assert twice.returncode == 1
        assert f"no unverified report {event_id}" in twice.output
        async with stage.container.db.read() as conn:
            actions = (await conn.execute(select(audit_log.c.action))).scalars()
            assert "inbound.apply" in list(actions)


async def test_unsubscribe_mail_brought_by_an_alias_is_read_as_unsubscribe(stage: Stage) -> None:
    """An alias delivering the List-Unsubscribe mailto into the bounce mailbox: its
    Delivered-To names the bounce address, its To the unsubscribe address; it unsubscribes."""
    header = stage.sent[reader(1)].data.split(b"\r\n\r\n", 1)[0].decode().replace("\r\n ", " ")
    subject = header.split("mailto:" + UNSUBSCRIBE + "?subject=", 1)[1].split(">", 1)[0]
    request = EmailMessage()
    request["Delivered-To"] = BOUNCES
    request["From"] = reader(1)
    request["To"] = UNSUBSCRIBE
    request["Subject"] = subject
    request.set_content("")
    [outcome] = await stage.container.inbound_mail.receive_stored(request.as_bytes())
    assert outcome.value == "applied"
    async with stage.container.db.read() as conn:
        left = (
            await conn.execute(
                select(func.count()).where(subscriptions.c.unsubscribed_at.is_not(None))
            )
        ).scalar()
    assert left == 1


AUDIENCE = 120
SAMPLE = 20


async def test_forged_complaints_with_real_message_ids_never_pause_a_send(
    database_url: str,
) -> None:
    """Auto-pause (SND-24) counts only authenticated complaints: complaints to the bare
    address quoting correctly computed Message-IDs of a running campaign, far past the
    threshold, leave it sending to the end."""
    slow = Faults(delay_seconds=0.05, delay_commands=frozenset({"DATA"}))
    async with SmtpSink(clock=utcnow, port=0, faults=slow) as sink:
        settings = make_settings(
            database_url,
            queue=FAST_QUEUE,
            smtp={"host": "127.0.0.1", "port": sink.port, "security": "none"},
            inbound={"bounce_address": BOUNCES},
            bulk_email={
                "batch_size": 20,
                "in_flight_chunk": 5,
                "concurrency": 1,
                "auto_pause_complaint_sample": SAMPLE,
            },
            **real_mail(provider="smtp"),
        )
        async with api_client(settings) as (client, container):
            headers = await admin_headers(container)
            await create_newsletter(client, headers)
            await seed(container, "weekly", AUDIENCE)
            campaign_id = await create_campaign(client, headers)
            sent = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
            assert sent.status_code == 202, sent.text
            mail = container.inbound_mail
            async with (
                InboundServer(accepts=mail.accepts, deliver=mail.receive) as server,
                workers(container),
            ):

                async def handed_over() -> bool:
                    async with container.db.read() as conn:
                        return await feedback_counts.sent(conn, campaign_id) >= SAMPLE

                await wait_for(handed_over, within_seconds=60)
                for message in list(sink.messages)[:10]:
                    report = dev_arf(message.data, message.recipients[0])
                    original_id = email.message_from_bytes(message.data)["Message-ID"]
                    assert original_id.strip("<>") in report.decode()
                    await asyncio.to_thread(_send, server.port, report)
                status = await container.send_status.status(campaign_id)
                assert status.status == "submitting"
                assert await wait_for_campaign_status(container, campaign_id) == "submitted"
            assert len(sink.messages) == AUDIENCE
            async with container.db.read() as conn:
                counted = (await feedback_counts.watch(conn, campaign_id)).now
                kept = (
                    await conn.execute(
                        select(func.count()).where(inbound_events.c.status == "unverified")
                    )
                ).scalar()
            assert counted.complained == 0
            assert kept == 10


def dev_arf(original: bytes, complainant: str) -> bytes:
    """A feedback-loop report naming its reader and quoting the original (Message-ID and
    all) but with no VERP return path, to the bare bounce address."""
    from tidings.devservers import dev_reports

    return dev_reports.arf(original, to=BOUNCES, complainant=complainant, return_path=None)


def _send(port: int, data: bytes) -> None:
    import smtplib

    with smtplib.SMTP("127.0.0.1", port, timeout=10) as client:
        client.sendmail("fbl@isp.example", [BOUNCES], data)


async def test_the_admin_inbound_page_lists_unverified_reports_to_apply_or_discard(
    stage: Stage,
) -> None:
    """An operator in the browser sees what waits and why it was not trusted, and applies or
    discards each one; both leave the list, and the audit log has them with who did it."""
    await deliver(stage, BOUNCES, qmail_bounce(reader(2)))
    await deliver(stage, BOUNCES, forged_dsn([reader(4)]))
    [(applied_id, _, _), (discarded_id, _, _)] = await _kept(stage)
    async with ui_app(stage.container.settings) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        listed = await client.get("/admin/events")
        assert listed.status_code == 200
        assert "sent to the bare bounce address, with no VERP MAC" in listed.text
        assert f"/admin/events/{applied_id}/apply" in listed.text
        applied = await client.post(f"/admin/events/{applied_id}/apply", data={"csrf_token": csrf})
        assert applied.status_code == 303
        discarded = await client.post(
            f"/admin/events/{discarded_id}/discard", data={"csrf_token": csrf}
        )
        assert discarded.status_code == 303
        assert "No reports waiting for review." in (await client.get("/admin/events")).text
        reviewed = (await client.get("/admin/events?reviewed=true")).text
        assert "applied by admin:" in reviewed
        assert "discarded by admin:" in reviewed
    assert (await outcome_of(stage, reader(2)))[0] == "hard_bounce"
    assert (await outcome_of(stage, reader(4)))[0] is None
    async with stage.container.db.read() as conn:
        audited = (await conn.execute(select(audit_log.c.action, audit_log.c.actor))).all()
    actions = {action for action, actor in audited if actor.startswith("admin:")}
    assert {"inbound.apply", "inbound.discard"} <= actions


async def test_transactional_mail_carries_a_return_path_and_its_bounce_comes_back(
    stage: Stage,
) -> None:
    """A confirmation or an API email to a dead address must be heard of too: it goes out
    with a VERP return path naming its job, and the DSN to it bounces the address the job
    mailed (not whatever the DSN names) and marks the message."""
    container = stage.container
    async with api_client(container.settings) as (client, second):
        headers = await admin_headers(second)
        body = {"to": reader(2), "subject": "Your receipt", "text": "Thanks."}
        queued = await client.post("/api/admin/emails", json=body, headers=headers)
        assert queued.status_code == 202, queued.text
        job_id = queued.json()["job_id"]
    before = len(stage.sink.messages)

    async def mailed() -> bool:
        return len(stage.sink.messages) > before

    async with workers(container):
        await wait_for(mailed, within_seconds=20)
    receipt = stage.sink.messages[-1]
    assert list(receipt.recipients) == [reader(2)]
    assert receipt.mail_from.startswith(f"bounces+t{job_id}-")
    bounce = dsn(receipt, "someone-else@example.test", "5.1.1", "550 5.1.1 user unknown")
    assert await deliver(stage, receipt.mail_from, bounce) == {}
    async with container.db.read() as conn:
        reason = (await conn.execute(select(suppressions.c.reason))).scalars().all()
        marked = (
            await conn.execute(
                select(transactional_messages.c.bounce_kind).where(
                    transactional_messages.c.job_id == job_id
                )
            )
        ).scalar()
    assert reason == ["hard_bounce"]
    assert (await outcome_of(stage, reader(2)))[0] == "hard_bounce"
    assert marked == "hard"
    assert await _kept(stage) == []
