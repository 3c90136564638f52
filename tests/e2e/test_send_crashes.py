"""Real `tidings worker` processes sending a campaign to an SMTP sink: killed with SIGKILL at
random points (no recipient lost, none mailed twice, in-flight ones reported `uncertain`), and
two workers at once sharing one campaign's batches (ARC-5)."""

from __future__ import annotations

import asyncio
import os
import random
import signal
from collections import Counter

import pytest
from sqlalchemy import select

from tests.support.processes import (
    BATCHES_PER_WORKER,
    IN_FLIGHT_CHUNK,
    campaign_ready,
    delivered,
    worker_env,
    worker_process,
)
from tests.support.sending import recipient_states, wait_for_campaign_status
from tidings.storage.tables import campaign_batches

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kills", [5])
async def test_workers_killed_at_random_points_lose_nobody_and_mail_nobody_twice(
    database_url: str, kills: int
) -> None:
    """A crash at any moment costs nothing but time (PRI-1, PRI-2, SND-13): after SIGKILLs
    during preparation and submission, restarted workers complete the campaign; every reader
    is `sent` (delivered exactly once) or `uncertain` (was in flight at a kill, never resent),
    and the uncertain ones are bounded by the in-flight window."""
    audience = 8_000
    rng = random.Random(os.environ.get("TIDINGS_TEST_SEED", "kills"))
    async with campaign_ready(database_url, audience) as (container, sink, campaign_id):
        env = worker_env(container.settings.database.url, sink)
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
        received = delivered(sink)
        send = await container.sends.get_send(campaign_id)
    assert set(states) <= {"sent", "uncertain"}
    assert states.get("sent", 0) + states.get("uncertain", 0) == audience
    assert max(received.values()) == 1, "someone was mailed twice"
    assert len(received) >= states["sent"]
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
        env = worker_env(container.settings.database.url, sink, BULK_EMAIL_BATCH_SIZE="200")
        async with worker_process(env), worker_process(env):
            status = await wait_for_campaign_status(container, campaign_id, within_seconds=240)
        assert status == "submitted"
        async with container.db.read() as conn:
            claims = Counter(row.claimed_by for row in await conn.execute(select(campaign_batches)))
        received = delivered(sink)
        states = await recipient_states(container, campaign_id)
    assert states == {"sent": 6_000}
    assert len(received) == 6_000
    assert set(received.values()) == {1}
    assert len(claims) == 2, claims  # both processes took batches
    assert sum(claims.values()) == 30
