"""Real `tidings worker` processes sending a campaign to an SMTP sink: killed with SIGKILL at
random points (no recipient lost, none mailed twice, in-flight ones reported `uncertain`), and
two workers at once sharing one campaign's batches (ARC-5)."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.sending import (
    create_campaign,
    recipient_states,
    seed,
    wait_for_campaign_status,
)
from tidings.bootstrap import Container, utcnow
from tidings.delivery.sink import SmtpSink
from tidings.storage.tables import campaign_batches

pytestmark = pytest.mark.slow
LEASE_SECONDS = 2.0
IN_FLIGHT_CHUNK = 20
BATCHES_PER_WORKER = 2


def _worker_env(database_url: str, sink: SmtpSink) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    return {
        **clean,
        "TIDINGS_DATABASE_URL": database_url,
        "TIDINGS_LOG_FORMAT": "json",
        "TIDINGS_LOG_LEVEL": "warning",
        "TIDINGS_EMAIL_PROVIDER": "smtp",
        "TIDINGS_SMTP_HOST": "127.0.0.1",
        "TIDINGS_SMTP_PORT": str(sink.port),
        "TIDINGS_SMTP_SECURITY": "none",
        "TIDINGS_SMTP_POOL_SIZE": "8",
        "TIDINGS_EMAIL_SEND_DEADLINE_SECONDS": "1.5",
        "TIDINGS_WEBHOOKS_DEADLINE_SECONDS": "1.5",
        "TIDINGS_QUEUE_LEASE_SECONDS": str(LEASE_SECONDS),
        "TIDINGS_QUEUE_POLL_INTERVAL_SECONDS": "0.05",
        "TIDINGS_QUEUE_BACKOFF_BASE_SECONDS": "0.1",
        "TIDINGS_QUEUE_BACKOFF_MAX_SECONDS": "0.5",
        "TIDINGS_QUEUE_MAX_ATTEMPTS": "50",
        "TIDINGS_BULK_EMAIL_IN_FLIGHT_CHUNK": str(IN_FLIGHT_CHUNK),
        "TIDINGS_BULK_EMAIL_CONCURRENCY": str(BATCHES_PER_WORKER),
    }


@asynccontextmanager
async def worker_process(env: dict[str, str]) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tidings",
        "worker",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@asynccontextmanager
async def campaign_ready(
    database_url: str, audience: int
) -> AsyncIterator[tuple[Container, SmtpSink, int]]:
    """A queued campaign to `audience` confirmed readers and a sink that keeps messages in
    memory; the test's own process runs no workers."""
    settings = make_settings(database_url)
    async with api_client(settings) as (client, container), SmtpSink(clock=utcnow, port=0) as sink:
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", audience)
        campaign_id = await create_campaign(client, headers)
        response = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        assert response.status_code == 202, response.text
        yield container, sink, campaign_id


def _delivered(sink: SmtpSink) -> Counter[str]:
    return Counter(address for message in sink.messages for address in message.recipients)


@pytest.mark.parametrize("kills", [5])
async def test_workers_killed_at_random_points_lose_nobody_and_mail_nobody_twice(
    database_url: str, kills: int
) -> None:
    """A crash at any moment costs nothing but time (PRI-1, PRI-2, SND-13): after SIGKILLs
    during preparation and submission, restarted workers complete the campaign; every reader
    is `sent` (delivered exactly once) or `uncertain` (was in flight at a kill, never resent),
    and the uncertain ones are bounded by the in-flight window."""
    audience = 20_000
    rng = random.Random(os.environ.get("TIDINGS_TEST_SEED", "kills"))
    async with campaign_ready(database_url, audience) as (container, sink, campaign_id):
        env = _worker_env(container.settings.database.url, sink)
        for kill in range(kills):
            async with worker_process(env) as process:
                # The first kill lands in preparation; later ones mid-submission.
                await asyncio.sleep(rng.uniform(0.3, 1.0) if kill == 0 else rng.uniform(1, 3))
                assert process.returncode is None, "the worker died on its own"
                process.send_signal(signal.SIGKILL)
                await process.wait()
        async with worker_process(env):
            status = await wait_for_campaign_status(container, campaign_id, within_seconds=240)
        assert status == "submitted"
        states = await recipient_states(container, campaign_id)
        delivered = _delivered(sink)
        send = await container.sends.get_send(campaign_id)
    assert set(states) <= {"sent", "uncertain"}
    assert states.get("sent", 0) + states.get("uncertain", 0) == audience
    assert max(delivered.values()) == 1, "someone was mailed twice"
    assert len(delivered) >= states["sent"]
    window = kills * IN_FLIGHT_CHUNK * BATCHES_PER_WORKER
    assert states.get("uncertain", 0) <= window
    assert send is not None
    assert (send.email_count, send.uncertain_count) == (states["sent"], states.get("uncertain", 0))


async def test_two_worker_processes_share_one_campaign(database_url: str) -> None:
    """ARC-5: adding workers adds throughput — both processes submit batches of the same
    campaign, and every reader is mailed exactly once."""
    if database_url.startswith("sqlite"):
        pytest.skip("scale-out across processes is the PostgreSQL deployment (ARC-2)")
    async with campaign_ready(database_url, 6_000) as (container, sink, campaign_id):
        env = {
            **_worker_env(container.settings.database.url, sink),
            "TIDINGS_BULK_EMAIL_BATCH_SIZE": "200",
        }
        async with worker_process(env), worker_process(env):
            status = await wait_for_campaign_status(container, campaign_id, within_seconds=240)
        assert status == "submitted"
        async with container.db.read() as conn:
            from sqlalchemy import select

            claims = Counter(row.claimed_by for row in await conn.execute(select(campaign_batches)))
        delivered = _delivered(sink)
        states = await recipient_states(container, campaign_id)
    assert states == {"sent": 6_000}
    assert len(delivered) == 6_000
    assert set(delivered.values()) == {1}
    assert len(claims) == 2, claims  # both processes took batches
    assert sum(claims.values()) == 30
