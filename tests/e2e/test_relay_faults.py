"""Relay faults classified by what the relay actually got (PRV-1, SND-13): only a reader whose
message went out by DATA without a reply is `uncertain`; a relay that never greeted, a wait
for a pooled connection and any 4xx reply leave readers to be sent later, never `failed`."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import select

from tests.factories import api_client, real_mail
from tests.support.outage import database_outage
from tests.support.sending import (
    FAST_QUEUE,
    mailed_at_least,
    queued_send,
    recipient_states,
    wait_for,
    wait_for_campaign_status,
    workers,
)
from tidings.bootstrap import Container, utcnow
from tidings.config import load_settings
from tidings.devservers.sink import Faults, SmtpSink
from tidings.storage.tables import campaign_recipients, jobs, subscribers

PATIENT_QUEUE = {**FAST_QUEUE, "max_attempts": 100}


def _settings(database_url: str, port: int, **sections: dict[str, Any]) -> Any:
    smtp = {"host": "127.0.0.1", "port": port, "security": "none", **sections.pop("smtp", {})}
    return load_settings(
        database={"url": database_url, **sections.pop("database", {})},
        log={"format": "json"},
        queue=sections.pop("queue", PATIENT_QUEUE),
        smtp=smtp,
        **real_mail(provider="smtp", **sections.pop("email", {})),
        **sections,
    )


def _delivered(sink: SmtpSink) -> Counter[str]:
    return Counter(address for message in sink.messages for address in message.recipients)


async def _batch_retries(container: Container) -> int:
    """How many times `send_batch` jobs were handed back to be tried again later."""
    async with container.db.read() as conn:
        query = select(jobs.c.attempts, jobs.c.last_error).where(jobs.c.kind == "send_batch")
        return sum(attempts for attempts, error in await conn.execute(query) if error)


@contextlib.asynccontextmanager
async def _silent_relay() -> AsyncIterator[tuple[asyncio.Server, list[asyncio.Transport]]]:
    """A relay that accepts TCP connections and never says a word (no greeting)."""
    held: list[asyncio.Transport] = []

    class Silent(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            held.append(transport)

    server = await asyncio.get_running_loop().create_server(Silent, "127.0.0.1", 0)
    try:
        yield server, held
    finally:
        server.close()
        for transport in held:
            transport.close()
        await server.wait_closed()


async def test_a_relay_that_never_greets_leaves_nobody_uncertain_and_sends_once_it_answers(
    database_url: str,
) -> None:
    """A relay that takes the connection and never greets received nothing: its readers go
    back to `pending` (the job tries later), none is `uncertain` — which would mean never
    mailed — and once a working relay answers on that port, each gets exactly one copy."""
    async with _silent_relay() as (server, held):
        port = server.sockets[0].getsockname()[1]
        settings = _settings(
            database_url,
            port,
            smtp={"timeout_seconds": 5},  # longer than the send deadline: the deadline decides
            email={"send_deadline_seconds": 0.5},
            bulk_email={"in_flight_chunk": 5},
        )
        async with api_client(settings) as (client, container):
            campaign_id = await queued_send(client, container, 10)
            async with workers(container):
                await wait_for(lambda: _retried_at_least(container, 2))
                # Pending, or in flight again on the next try: never uncertain, never failed.
                states = await recipient_states(container, campaign_id)
                assert set(states) <= {"pending", "sending"}, states
                assert held, "the silent relay was never reached"
                server.close()
                for transport in held:
                    transport.close()
                await server.wait_closed()
                async with SmtpSink(clock=utcnow, port=port) as sink:
                    assert await wait_for_campaign_status(container, campaign_id) == "submitted"
            assert await recipient_states(container, campaign_id) == {"sent": 10}
    assert set(_delivered(sink).values()) == {1}
    assert len(_delivered(sink)) == 10


async def _retried_at_least(container: Container, count: int) -> bool:
    return await _batch_retries(container) >= count


async def test_waiting_for_a_pooled_connection_does_not_count_against_the_deadline(
    database_url: str,
) -> None:
    """With one pooled connection and four messages at once, the last waits for the other
    three: that wait is not the relay's slowness, so nobody may end `uncertain` for it."""
    faults = Faults(delay_seconds=0.2, delay_commands=frozenset({"DATA"}))
    async with SmtpSink(clock=utcnow, port=0, faults=faults) as sink:
        settings = _settings(
            database_url,
            sink.port,
            smtp={"pool_size": 1},
            email={"send_deadline_seconds": 0.5},
            bulk_email={"in_flight_chunk": 4, "submission_concurrency": 4, "concurrency": 1},
        )
        async with api_client(settings) as (client, container):
            campaign_id = await queued_send(client, container, 12)
            async with workers(container):
                assert await wait_for_campaign_status(container, campaign_id) == "submitted"
            assert await recipient_states(container, campaign_id) == {"sent": 12}
    assert set(_delivered(sink).values()) == {1}


async def test_a_452_past_a_connections_recipient_limit_is_retried_on_a_fresh_connection(
    database_url: str,
) -> None:
    """A relay that answers 452 (too many recipients on this connection) after ten per
    connection deferred those readers; they are sent on a fresh connection, never `failed`."""
    faults = Faults(rcpt_limit_per_connection=10)
    async with SmtpSink(clock=utcnow, port=0, faults=faults) as sink:
        settings = _settings(
            database_url,
            sink.port,
            smtp={"pool_size": 1},
            bulk_email={"in_flight_chunk": 5, "recipient_retries": 0},
        )
        async with api_client(settings) as (client, container):
            campaign_id = await queued_send(client, container, 40)
            async with workers(container):
                assert await wait_for_campaign_status(container, campaign_id) == "submitted"
            assert await recipient_states(container, campaign_id) == {"sent": 40}
    assert set(_delivered(sink).values()) == {1}
    assert len(_delivered(sink)) == 40
    assert sink.connections_accepted >= 4


async def test_a_reader_deferred_past_the_retries_is_pending_then_sent_never_failed(
    database_url: str,
) -> None:
    """A 451 for one reader, again and again: after the tries inside the batch the reader
    goes back to `pending` with the reply's code, the others are sent, and the job tries
    again later until the relay takes it. A 4xx never becomes `failed` (PRV-1)."""
    deferring = Faults(rcpt_replies={"reader-3": "451 4.2.0 Mailbox busy, try again later"})
    async with SmtpSink(clock=utcnow, port=0, faults=deferring) as sink:
        settings = _settings(
            database_url, sink.port, bulk_email={"in_flight_chunk": 5, "recipient_retries": 1}
        )
        async with api_client(settings) as (client, container):
            campaign_id = await queued_send(client, container, 10)
            async with workers(container):
                await wait_for(lambda: _retried_at_least(container, 2))
                assert await wait_for(lambda: _deferred_reader(container)) == (
                    "pending",
                    "smtp_deferred_451",
                )
                assert (await recipient_states(container, campaign_id))["sent"] == 9
                sink.faults = Faults(rcpt_replies={})
                assert await wait_for_campaign_status(container, campaign_id) == "submitted"
            assert await recipient_states(container, campaign_id) == {"sent": 10}
    assert _delivered(sink)["reader-3@example.test"] == 1
    assert set(_delivered(sink).values()) == {1}


async def _deferred_reader(container: Container) -> tuple[str, str] | None:
    """reader-3's state and reason, once it is between two tries (not in flight)."""
    query = (
        select(campaign_recipients.c.state, campaign_recipients.c.reason)
        .join(subscribers, subscribers.c.id == campaign_recipients.c.subscriber_id)
        .where(subscribers.c.email == "reader-3@example.test")
    )
    async with container.db.read() as conn:
        state, reason = (await conn.execute(query)).one()
    return None if state == "sending" else (str(state), str(reason))


async def test_a_brief_database_outage_after_the_relay_accepted_leaves_nobody_uncertain(
    database_url: str,
) -> None:
    """The relay took the messages; then the database went away for a moment (a restart).
    The worker keeps the outcomes it holds and writes them once the database is back: every
    reader `sent`, each mailed once — none `uncertain`, which would mean never resent."""
    faults = Faults(delay_seconds=0.05, delay_commands=frozenset({"DATA"}))
    async with SmtpSink(clock=utcnow, port=0, faults=faults) as sink:
        settings = _settings(
            database_url,
            sink.port,
            database={"sqlite_busy_timeout_ms": 100},
            bulk_email={"in_flight_chunk": 5, "submission_concurrency": 2},
        )
        async with api_client(settings) as (client, container):
            campaign_id = await queued_send(client, container, 60)
            async with workers(container):
                await wait_for(lambda: mailed_at_least(sink, 10))
                async with database_outage(database_url):
                    await asyncio.sleep(1.0)  # how long the database is away: the fault
                assert await wait_for_campaign_status(container, campaign_id) == "submitted"
            assert await recipient_states(container, campaign_id) == {"sent": 60}
    assert set(_delivered(sink).values()) == {1}
    assert len(_delivered(sink)) == 60
