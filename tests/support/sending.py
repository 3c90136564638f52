"""Helpers for sending tests: a studio with a newsletter and an audience, workers running in
the test's process, and waiting for a campaign's terminal status."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
from sqlalchemy import func, select

from tidings.bootstrap import Container
from tidings.storage import seeding
from tidings.storage.tables import campaign_recipients, campaigns, newsletters

TERMINAL = frozenset({"submitted", "failed"})
FAST_QUEUE = {
    "poll_interval_seconds": 0.05,
    "backoff_base_seconds": 0.05,
    "backoff_max_seconds": 0.2,
    "max_attempts": 5,
    "lease_seconds": 30,
}


async def seed(container: Container, slug: str, count: int) -> None:
    """`count` confirmed subscribers (alternately free and paid) of newsletter `slug`."""
    async with container.db.write() as conn:
        newsletter_id = (
            await conn.execute(select(newsletters.c.id).where(newsletters.c.slug == slug))
        ).scalar_one()
        await seeding.seed_audience(
            conn, newsletter_id=newsletter_id, count=count, now=container.sending.now()
        )


async def create_campaign(client: httpx.AsyncClient, headers: dict[str, str], **extra: Any) -> int:
    body = {
        "newsletter": "weekly",
        "subject": "Issue 1",
        "body": 'Hello {{ name | fallback: "reader" }}.\n\n::: only paid\nMembers only.\n:::\n',
        **extra,
    }
    response = await client.post("/api/admin/campaigns", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


async def wait_for_campaign_status(
    container: Container, campaign_id: int, *, within_seconds: float = 60.0
) -> str:
    """Wait until the campaign is `submitted` or `failed` and return which: the caller
    asserts the one it expects (a terminal status is not proof of success)."""
    deadline = asyncio.get_running_loop().time() + within_seconds
    while True:
        async with container.db.read() as conn:
            status = (
                await conn.execute(select(campaigns.c.status).where(campaigns.c.id == campaign_id))
            ).scalar_one()
        if status in TERMINAL:
            return str(status)
        assert asyncio.get_running_loop().time() < deadline, f"still {status!r}"
        await asyncio.sleep(0.05)


async def recipient_states(container: Container, campaign_id: int) -> dict[str, int]:
    async with container.db.read() as conn:
        query = (
            select(campaign_recipients.c.state, func.count())
            .where(campaign_recipients.c.campaign_id == campaign_id)
            .group_by(campaign_recipients.c.state)
        )
        return {state: int(count) for state, count in await conn.execute(query)}


@contextlib.asynccontextmanager
async def workers(container: Container) -> AsyncIterator[None]:
    """The container's workers, as `tidings worker` runs them, until the block ends."""
    stop = asyncio.Event()
    task = asyncio.create_task(container.run_workers(stop))
    try:
        yield
    finally:
        stop.set()
        await task
