"""Helpers for audience tests: a newsletter, the confirmation link from the queued email,
and a snapshot of audience tables to prove bad input changed nothing."""

from __future__ import annotations

import re
from typing import Any

import httpx
from sqlalchemy import select

from tidings.bootstrap import Container
from tidings.storage.tables import (
    jobs,
    newsletters,
    subscribers,
    subscriptions,
    suppressions,
    webhook_deliveries,
)

CONFIRM_LINK = re.compile(r"/confirm/([A-Za-z0-9_-]{43})")


async def create_newsletter(
    client: httpx.AsyncClient, headers: dict[str, str], slug: str = "weekly", **extra: Any
) -> dict[str, Any]:
    body = {
        "slug": slug,
        "name": f"The {slug.title()}",
        "sender_name": "Editor",
        "sender_address": "editor@example.org",
        **extra,
    }
    response = await client.post("/api/admin/newsletters", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def confirmation_tokens(container: Container) -> list[str]:
    """Tokens from every queued confirmation email, oldest first."""
    found = []
    for job in reversed(await container.queue.list_jobs(kind="send_email", limit=1000)):
        match = CONFIRM_LINK.search(job.payload["text"])
        if match:
            found.append(match.group(1))
    return found


async def snapshot(container: Container) -> dict[str, list[tuple[Any, ...]]]:
    """Rows of every table a public or admin audience request could change (the rate-limit
    table is left out: counting a refused request is the point of it)."""
    tables = (newsletters, subscribers, subscriptions, suppressions, jobs, webhook_deliveries)
    async with container.db.read() as conn:
        return {
            table.name: sorted(tuple(row) for row in await conn.execute(select(table)))
            for table in tables
        }
