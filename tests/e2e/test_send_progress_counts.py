"""Counts that survive a hand-back (SND-14, SND-17): a send's progress moves chunk by chunk,
and what a stopped attempt reports is what its recipient rows and the relay say."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from tests.factories import admin_headers, api_client, make_settings, real_mail
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
from tidings.devservers.sink import Faults, SmtpSink

READERS = 60  # two batches of 30 (free and paid readers are two segments)


def _settings(database_url: str, port: int) -> Any:
    return make_settings(
        database_url,
        queue=FAST_QUEUE,
        smtp={"host": "127.0.0.1", "port": port, "security": "none"},
        bulk_email={"in_flight_chunk": 5, "submission_concurrency": 1},
        **real_mail(provider="smtp"),
    )


@contextlib.asynccontextmanager
async def _queued(database_url: str) -> AsyncIterator[tuple[Any, Container, Any, SmtpSink, int]]:
    """A send of READERS queued (no worker yet) to a relay taking 50 ms per message."""
    faults = Faults(delay_seconds=0.05, delay_commands=frozenset({"DATA"}))
    async with (
        SmtpSink(clock=utcnow, port=0, faults=faults) as sink,
        api_client(_settings(database_url, sink.port)) as (client, container),
    ):
        campaign_id = await queued_send(client, container, READERS)
        yield client, container, await admin_headers(container), sink, campaign_id


async def test_progress_moves_by_chunk_not_by_batch(database_url: str) -> None:
    """An admin watching a send of 1,000-recipient batches must see it move as chunks go
    out, not sit at 0 until a whole batch is done: every chunk's outcomes are counted on
    its batch in the write that records them."""
    async with _queued(database_url) as (client, container, headers, sink, campaign_id):
        seen: set[int] = set()

        async def part_of_a_batch_counted() -> bool:
            status = (
                await client.get(f"/api/admin/campaigns/{campaign_id}/status", headers=headers)
            ).json()
            seen.add(status["completed"])
            return any(0 < completed < 30 for completed in seen)

        async with workers(container):
            assert await wait_for(part_of_a_batch_counted)
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    assert len(sink.messages) == READERS


async def test_a_send_stopped_mid_batch_reports_what_its_rows_and_the_relay_say(
    database_url: str,
) -> None:
    """Workers stopped (SIGTERM) mid-batch hand their batches back; the status must then
    say exactly how many were sent — the number in the database and at the relay — and
    count them as processed, not report `0/60` after messages went out."""
    async with _queued(database_url) as (client, container, headers, sink, campaign_id):
        async with workers(container):
            await wait_for(lambda: mailed_at_least(sink, 12))
        # Stopped: the chunks in hand were finished and settled, the batches handed back.
        states = await recipient_states(container, campaign_id)
        status = (
            await client.get(f"/api/admin/campaigns/{campaign_id}/status", headers=headers)
        ).json()
        assert set(states) == {"sent", "pending"}, states
        assert states["sent"] == len(sink.messages) < READERS
        assert status["recipients"]["sent"] == states["sent"]
        assert status["completed"] == states["sent"]
        async with workers(container):  # and the next run sends the rest, once each
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        assert await recipient_states(container, campaign_id) == {"sent": READERS}
    assert len({m.recipients for m in sink.messages}) == len(sink.messages) == READERS
