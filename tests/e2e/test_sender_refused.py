"""A refusal on the sender's side is not the recipients' failure (issue 35 item 9, SND-26).

The outside reproduction: Postfix as the relay, no credentials configured, answered every RCPT
`554 5.7.1 <x@y>: Relay access denied`; tidings failed the whole audience permanently, the
campaign ended `submitted` with 0 sent, `send --wait` exited 0, nothing told the operator, and
neither retry nor resend could send it again. Here the relay is the aiosmtpd sink on loopback
answering the same way; every test runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import func, select, update

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings, real_mail
from tests.support.cli import clean_env, tidings
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    recipient_states,
    registry,
    running,
    seed,
    wait_for_campaign_status,
    wait_for_send_status,
    workers,
)
from tidings.bootstrap import Container, utcnow
from tidings.delivery.provider import Envelope, Rejection, SendResult
from tidings.delivery.smtp_failures import SAME_REFUSAL_DOMAINS
from tidings.devservers.sink import Faults, SmtpSink
from tidings.domain.provider_health import ProviderProblem
from tidings.storage.tables import campaign_recipients, jobs, subscribers

READERS = 6
RELAY_DENIED = "554 5.7.1 <reader@example.test>: Relay access denied"


def _settings(database_url: str, port: int, **smtp: Any) -> Any:
    sections: dict[str, Any] = {}
    if "dkim" in smtp:
        sections["dkim"] = smtp.pop("dkim")
    return make_settings(
        database_url,
        queue=FAST_QUEUE,
        smtp={"host": "127.0.0.1", "port": port, "security": "none", **smtp},
        **real_mail(provider="smtp"),
        **sections,
    )


@pytest.fixture
async def sink() -> AsyncIterator[SmtpSink]:
    async with SmtpSink(clock=utcnow) as running_sink:
        yield running_sink


async def _studio(client: Any, container: Container) -> dict[str, str]:
    headers = await admin_headers(container)
    await create_newsletter(client, headers)
    await seed(container, "weekly", READERS)
    return headers


async def _send(client: Any, headers: dict[str, str]) -> int:
    campaign_id = await create_campaign(client, headers)
    sent = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
    assert sent.status_code == 202, sent.text
    return campaign_id


async def _paused(client: Any, container: Container, headers: dict[str, str]) -> ProviderProblem:
    """Send a campaign and run the workers until it pauses itself; nobody may have failed."""
    campaign_id = await _send(client, headers)
    async with workers(container):
        await wait_for_send_status(container, campaign_id, "paused")
    assert await recipient_states(container, campaign_id) == {"pending": READERS}
    problem = (await container.send_status.status(campaign_id)).provider_problem
    assert problem is not None
    assert problem.paused
    return problem


async def _readers_on_their_own_domains(container: Container) -> None:
    """Each reader at a domain of their own (the seeded audience shares one)."""
    address = "reader-" + func.cast(subscribers.c.id, subscribers.c.email.type) + "@d"
    address = address + func.cast(subscribers.c.id, subscribers.c.email.type) + ".example"
    async with container.db.write() as conn:
        await conn.execute(update(subscribers).values(email=address, email_key=address))


def _delivered(sink: SmtpSink) -> Counter[str]:
    return Counter(address for message in sink.messages for address in message.recipients)


async def _everyone_sent_once(container: Container, campaign_id: int, sink: SmtpSink) -> None:
    """Run the workers until the send is submitted: every reader sent, each mailed once."""
    async with workers(container):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    assert await recipient_states(container, campaign_id) == {"sent": READERS}
    delivered = _delivered(sink)
    assert len(delivered) == READERS
    assert set(delivered.values()) == {1}


async def _batch_job_retries(container: Container) -> list[tuple[int, str | None]]:
    async with container.db.read() as conn:
        query = select(jobs.c.attempts, jobs.c.last_error).where(jobs.c.kind == "send_batch")
        return [(int(attempts), error) for attempts, error in await conn.execute(query)]


async def test_a_relay_denying_every_recipient_pauses_the_send_and_resume_sends_everyone_once(
    database_url: str, sink: SmtpSink
) -> None:
    """The outside reproduction itself: the send pauses with the relay's problem named in the
    status, the API and `send --wait` (exit 1, not 0); nobody is `failed`, everyone waits
    `pending`; once the relay is fixed, resume sends each reader exactly once."""
    sink.faults = Faults(rcpt_replies={"": RELAY_DENIED})
    settings = _settings(database_url, sink.port)
    async with api_client(settings) as (client, container):
        headers = await _studio(client, container)
        campaign_id = await create_campaign(client, headers)
        env = clean_env(
            DATABASE_URL=settings.database.url,
            EMAIL_PROVIDER="smtp",
            EMAIL_FROM_ADDRESS="desk@news.example.org",
            THEME_POSTAL_ADDRESS="The Test Gazette, 1 Quay Street, Porthaven",
            SITE_PUBLIC_URL="https://news.example.org",
        )
        async with workers(container):
            ran = await asyncio.to_thread(
                tidings, "campaign", "send", str(campaign_id), "--yes", "--wait", env=env
            )
        shown = " ".join(ran.output.split())
        assert ran.returncode == 1, shown
        endpoint = f"127.0.0.1:{sink.port}"
        named = f"SMTP {endpoint} refuses the sender (relaying denied, 554 5.7.1)"
        assert f"campaign {campaign_id} paused: {named}" in shown
        assert "reader" not in shown  # the reply text echoes the address: never shown
        assert await recipient_states(container, campaign_id) == {"pending": READERS}
        assert sink.messages == []

        status = await container.send_status.status(campaign_id)
        assert status.status == "paused"
        problem = status.provider_problem
        assert problem is not None
        assert (problem.paused, problem.endpoint) == (True, endpoint)
        assert problem.summary().startswith(named)
        body = (
            await client.get(f"/api/admin/campaigns/{campaign_id}/status", headers=headers)
        ).json()
        assert body["provider_problem"]["paused"] is True
        assert body["provider_problem"]["summary"] == problem.summary()
        assert body["recipients"]["failed"] == 0
        assert [found for found, _ in await container.send_status.provider_problems()] == [
            campaign_id
        ]
        listed = await asyncio.to_thread(tidings, "campaign", "status", str(campaign_id), env=env)
        assert named in " ".join(listed.output.split())

        sink.faults = Faults()  # the operator gives the relay its credentials
        await container.control.resume(campaign_id, actor="test:operator")
        await _everyone_sent_once(container, campaign_id, sink)
        assert (await container.send_status.status(campaign_id)).provider_problem is None


async def test_a_refused_login_pauses_the_send_named_and_is_not_retried_like_an_outage(
    database_url: str,
) -> None:
    """A wrong password used to be retried with backoff for hours as "unreachable": it fails
    the same way every time, so the send pauses at once, the login named as `smtp check`
    names it, and no batch job is retried."""
    async with SmtpSink(clock=utcnow, credentials=("relay-user", "s3cret")) as guarded:
        settings = _settings(database_url, guarded.port, username="relay-user", password="wrong")
        async with api_client(settings) as (client, container):
            problem = await _paused(client, container, await _studio(client, container))
            assert problem.error == "authentication refused, 535 5.7.8"
            retried = await _batch_job_retries(container)
            assert retried
            assert all(attempts == 1 and error is None for attempts, error in retried), retried
        assert guarded.messages == []


async def test_the_same_refusal_for_several_domains_pauses_the_send(
    database_url: str, sink: SmtpSink
) -> None:
    """A relay's own refusal in words nobody lists (no "relay", no 5.7 code) is still told by
    its sameness: one reply for several recipient domains, nothing accepted between."""
    sink.faults = Faults(rcpt_replies={"": "550 Sender address rejected: not owned by user"})
    settings = _settings(database_url, sink.port)
    async with api_client(settings) as (client, container):
        headers = await _studio(client, container)
        await _readers_on_their_own_domains(container)
        problem = await _paused(client, container, headers)
        same = f"the same refusal for {SAME_REFUSAL_DOMAINS} recipient domains, 550"
        assert problem.error == same


async def test_one_unknown_user_in_a_batch_is_failed_and_everyone_else_sent(
    database_url: str, sink: SmtpSink
) -> None:
    """No regression: a 550 5.1.1 for one reader is hers alone — failed, the others sent, and
    the send is not paused."""
    settings = _settings(database_url, sink.port)
    async with api_client(settings) as (client, container):
        headers = await _studio(client, container)
        await _readers_on_their_own_domains(container)
        async with container.db.write() as conn:
            first = (await conn.execute(select(func.min(subscribers.c.id)))).scalar_one()
            await conn.execute(
                update(subscribers)
                .where(subscribers.c.id == first)
                .values(email="gone+reject550@d0.example", email_key="gone+reject550@d0.example")
            )
        campaign_id = await _send(client, headers)
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        assert await recipient_states(container, campaign_id) == {
            "sent": READERS - 1,
            "failed": 1,
        }
        async with container.db.read() as conn:
            reasons = (
                await conn.execute(
                    select(campaign_recipients.c.reason).where(
                        campaign_recipients.c.campaign_id == campaign_id,
                        campaign_recipients.c.state == "failed",
                    )
                )
            ).scalars()
            assert list(reasons) == ["smtp_rejected_550"]
        assert "gone+reject550@d0.example" not in _delivered(sink)


class _RelayBeforeTheFix:
    """What the SMTP provider answered before a refusal of the sender was told apart: each
    recipient rejected on its own, permanently, 554 (relay access denied)."""

    name = "smtp"

    async def send(self, envelope: Envelope) -> SendResult:
        return SendResult(
            accepted=[], rejected={envelope.recipients[0]: Rejection(True, 554, "denied")}
        )

    async def close(self) -> None:
        return None


@pytest.mark.parametrize("command", ["retry", "resend"])
async def test_a_campaign_a_sender_refusal_failed_before_the_fix_is_recovered(
    database_url: str, sink: SmtpSink, command: str
) -> None:
    """Campaigns already ended this way — `submitted`, 0 sent, everyone `failed` with the
    relay's 554 — must be recoverable: `tidings campaign retry` or `resend --state failed`
    sends each reader once through the relay, now fixed."""
    settings = _settings(database_url, sink.port)
    async with api_client(settings) as (client, container):
        campaign_id = await _send(client, await _studio(client, container))
        async with running(container, registry(container, provider=_RelayBeforeTheFix())):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        assert await recipient_states(container, campaign_id) == {"failed": READERS}

        env = clean_env(DATABASE_URL=settings.database.url)
        args = ["campaign", command, str(campaign_id)]
        if command == "resend":
            args += ["--state", "failed", "--note", "relay had no credentials", "--yes"]
        ran = await asyncio.to_thread(tidings, *args, env=env)
        assert ran.returncode == 0, ran.output
        await _everyone_sent_once(container, campaign_id, sink)


@pytest.fixture(scope="module")
def dkim_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path_factory.mktemp("dkim") / "dkim.pem"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    return path


async def test_the_relay_is_named_with_its_endpoint_when_dkim_signs(
    database_url: str, sink: SmtpSink, dkim_key: Path
) -> None:
    """With DKIM on, the provider is a signing wrapper around the relay: the problem must
    still name the relay's host and port, or the operator cannot tell which relay to fix."""
    sink.faults = Faults(rcpt_replies={"": RELAY_DENIED})
    dkim = {"selector": "news", "domain": "news.example.org", "private_key_file": str(dkim_key)}
    settings = _settings(database_url, sink.port, dkim=dkim)
    async with api_client(settings) as (client, container):
        problem = await _paused(client, container, await _studio(client, container))
    assert problem.endpoint == f"127.0.0.1:{sink.port}"
