"""Per-recipient-domain rates (SND-25) with two real `tidings worker` processes and an SMTP
sink: the limited domain's mail arrives within its rate, counted across both workers; its
readers wait without being failed or lost, and the other domain's readers in the same batches
are not held up."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import func, update

from tests.support.processes import campaign_ready, delivered, tail, worker_env, worker_process
from tests.support.sending import recipient_states, wait_for_campaign_status
from tidings.storage.tables import subscribers

pytestmark = pytest.mark.slow
AUDIENCE = 60
SLOW = "slow.example"
PER_MINUTE = 120  # two a second, a burst of two, for both workers together


def _most_in_any_window(times: list[datetime], seconds: float) -> int:
    ordered = sorted(times)
    return max(
        sum(1 for at in ordered if start <= at and (at - start).total_seconds() < seconds)
        for start in ordered
    )


async def test_a_limited_domain_waits_within_its_rate_and_holds_up_nobody_else(
    database_url: str, tmp_path: Path
) -> None:
    """A mailbox provider that takes 120 a minute must get no more from all workers together,
    its readers must all be mailed once in the end (never failed for waiting), and readers at
    other domains in the same batches must not wait behind them."""
    log = tmp_path / "worker.log"
    async with campaign_ready(database_url, AUDIENCE) as (container, sink, campaign_id):
        async with container.db.write() as conn:  # half the readers are at the slow domain
            moved = func.replace(subscribers.c.email, "@example.test", f"@{SLOW}")
            await conn.execute(
                update(subscribers)
                .where(subscribers.c.id % 2 == 0)
                .values(email=moved, email_key=moved)
            )
        env = worker_env(
            container.settings.database.url,
            sink,
            BULK_EMAIL_BATCH_SIZE="20",
            BULK_EMAIL_DOMAIN_RATES=f"{SLOW}={PER_MINUTE}",
            QUEUE_LEASE_SECONDS="15",
            EMAIL_SEND_DEADLINE_SECONDS="10",
            WEBHOOKS_DEADLINE_SECONDS="10",
            MAILGUN_TIMEOUT_SECONDS="10",
        )
        async with worker_process(env, log=log), worker_process(env, log=log):
            final = await wait_for_campaign_status(container, campaign_id, within_seconds=180)
        assert final == "submitted", tail(log)
        states = await recipient_states(container, campaign_id)
        assert states == {"sent": AUDIENCE}, states  # nobody failed, nobody left pending
        received = delivered(sink)
        assert len(received) == AUDIENCE
        assert set(received.values()) == {1}
        slow = [m.received_at for m in sink.messages if m.recipients[0].endswith(f"@{SLOW}")]
        fast = [m.received_at for m in sink.messages if not m.recipients[0].endswith(f"@{SLOW}")]
        assert len(slow) == len(fast) == AUDIENCE // 2
        per_second, burst = PER_MINUTE / 60, 2
        for window in (1.0, 3.0, 6.0):
            # One more for the sink's own timestamps, taken after each message arrived.
            assert _most_in_any_window(slow, window) <= per_second * window + burst + 1
        # Everyone at the other domain was mailed before the slow domain was half done.
        assert max(fast) < sorted(slow)[len(slow) // 2]


async def test_a_long_wait_gives_the_batch_back_without_spending_attempts(
    database_url: str, tmp_path: Path
) -> None:
    """A domain allowed twenty a minute makes its readers wait longer than a batch holds on:
    the batch is given back, `pending`, and its job comes back for them — without failing
    them or using up the job's attempts, however many times that happens."""
    log = tmp_path / "worker.log"
    async with campaign_ready(database_url, 8) as (container, sink, campaign_id):
        async with container.db.write() as conn:
            moved = func.replace(subscribers.c.email, "@example.test", f"@{SLOW}")
            await conn.execute(
                update(subscribers)
                .where(subscribers.c.id % 2 == 0)
                .values(email=moved, email_key=moved)
            )
        env = worker_env(
            container.settings.database.url,
            sink,
            BULK_EMAIL_DOMAIN_RATES=f"{SLOW}=20",  # one every 3 s: over the 2 s a batch waits
            QUEUE_MAX_ATTEMPTS="2",
            QUEUE_LEASE_SECONDS="15",
            EMAIL_SEND_DEADLINE_SECONDS="10",
            WEBHOOKS_DEADLINE_SECONDS="10",
            MAILGUN_TIMEOUT_SECONDS="10",
        )
        async with worker_process(env, log=log), worker_process(env, log=log):
            final = await wait_for_campaign_status(container, campaign_id, within_seconds=120)
        assert final == "submitted", tail(log)
        assert await recipient_states(container, campaign_id) == {"sent": 8}
        assert set(delivered(sink).values()) == {1}
        slow = [m.received_at for m in sink.messages if m.recipients[0].endswith(f"@{SLOW}")]
        assert len(slow) == 4
        assert _most_in_any_window(slow, 3.0) <= 3  # 20 a minute, a burst of one, +1 jitter
