"""Helpers for sending tests: a studio with a newsletter and an audience, workers running in
the test's process, and waiting for a campaign's terminal status."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
from sqlalchemy import func, select

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings, real_mail
from tests.support.waiting import wait_for
from tidings.bench import seeding
from tidings.bootstrap import Container
from tidings.config import Settings
from tidings.delivery.provider import ProviderUnreachable
from tidings.storage.tables import (
    campaign_batches,
    campaign_recipients,
    campaigns,
    newsletters,
    subscribers,
)

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


async def queued_send(client: httpx.AsyncClient, container: Container, readers: int) -> int:
    """The usual stage: newsletter `weekly` with `readers` confirmed readers (free and paid)
    and a campaign to them, sent now (queued, no worker yet). Returns the campaign id."""
    headers = await admin_headers(container)
    await create_newsletter(client, headers)
    await seed(container, "weekly", readers)
    campaign_id = await create_campaign(client, headers)
    response = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
    assert response.status_code == 202, response.text
    return campaign_id


async def prepared_send(
    client: httpx.AsyncClient, container: Container, headers: dict[str, str]
) -> int:
    """A campaign to the studio's readers, sent and prepared (its batches written, the send
    `submitting`), with no batch taken yet. Returns the campaign id."""
    from tidings.campaigns.jobs.payloads import SEND_CAMPAIGN

    campaign_id = await create_campaign(client, headers)
    response = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
    assert response.status_code == 202, response.text
    async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
        await wait_for_send_status(container, campaign_id, "submitting")
    return campaign_id


async def wait_for_campaign_status(
    container: Container, campaign_id: int, *, within_seconds: float = 60.0
) -> str:
    """Wait until the campaign is `submitted` or `failed` and return which: the caller
    asserts the one it expects (a terminal status is not proof of success)."""

    async def terminal() -> str | None:
        async with container.db.read() as conn:
            query = select(campaigns.c.status).where(campaigns.c.id == campaign_id)
            status = str((await conn.execute(query)).scalar_one())
        return status if status in TERMINAL else None

    return await wait_for(terminal, within_seconds=within_seconds, message="the send never ended")


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


class RaisingProvider:
    """A provider (the world outside) that raises an arbitrary exception for chosen
    addresses and captures the rest through the real capture provider."""

    name = "flaky"

    def __init__(self, inner: Any, failing: set[str], error: BaseException) -> None:
        self._inner = inner
        self._failing = failing
        self._error = error
        self.calls: list[str] = []

    async def send(self, envelope: Any) -> Any:
        self.calls.append(envelope.recipients[0])
        if envelope.recipients[0] in self._failing:
            raise self._error
        return await self._inner.send(envelope)

    async def close(self) -> None:
        return None


class Relay:
    """The relay (the world outside), stood in for: messages are captured through the real
    capture provider once `inner` is set, except that addresses in `unreachable` cannot be
    reached (as if the relay were down for them) until removed, or until `recovered()`, if
    set, answers true; `before_send`, if set, is called with the number of messages handed
    over so far, just before each one."""

    name = "relay"

    def __init__(self, inner: Any = None) -> None:
        self.inner = inner
        self.unreachable: set[str] = set()
        self.recovered: Callable[[], Awaitable[bool]] | None = None
        self.before_send: Callable[[int], None] | None = None
        self.handed_over = 0

    async def send(self, envelope: Any) -> Any:
        if envelope.recipients[0] in self.unreachable and not (
            self.recovered is not None and await self.recovered()
        ):
            raise ProviderUnreachable("relay down (test double)")
        if self.before_send is not None:
            self.before_send(self.handed_over)
        self.handed_over += 1
        return await self.inner.send(envelope)

    async def close(self) -> None:
        return None


def registry(
    container: Container,
    *,
    kinds: tuple[str, ...] | None = None,
    provider: Any = None,
    send_concurrency: int = 1,
) -> Any:
    """The campaign handlers as bootstrap registers them, optionally only some kinds, with a
    given provider (a double of the outside world) instead of the configured one."""
    from tidings.campaigns.jobs.finalise_campaign import FinaliseCampaignHandler
    from tidings.campaigns.jobs.payloads import FINALISE_CAMPAIGN, SEND_BATCH, SEND_CAMPAIGN
    from tidings.campaigns.jobs.send_batch import SendBatchHandler
    from tidings.campaigns.jobs.send_campaign import SendCampaignHandler
    from tidings.campaigns.submit.per_recipient import PerRecipientSubmit
    from tidings.queue.policy import HandlerRegistry

    strategy = (
        PerRecipientSubmit(
            provider,
            chunk=5,
            concurrency=4,
            retries=1,
            deadline_seconds=5.0,
            retry_pause_seconds=0.01,
        )
        if provider is not None
        else container.submit_strategy()
    )
    handlers = {
        SEND_CAMPAIGN: (SendCampaignHandler(container.sending), send_concurrency),
        SEND_BATCH: (SendBatchHandler(container.sending, strategy), 2),
        FINALISE_CAMPAIGN: (FinaliseCampaignHandler(container.sending), 1),
    }
    chosen = HandlerRegistry()
    for kind, (handler, concurrency) in handlers.items():
        if kinds is None or kind in kinds:
            chosen.register(kind, handler, concurrency=concurrency, renew_lease=True)
    return chosen


@contextlib.asynccontextmanager
async def running(container: Container, handlers: Any) -> AsyncIterator[None]:
    """Run exactly `handlers` (a registry) until the block ends."""
    stop = asyncio.Event()
    task = asyncio.create_task(container.queue.run_workers(handlers, stop))
    try:
        yield
    finally:
        stop.set()
        await task


async def wait_for_send_status(container: Container, campaign_id: int, status: str) -> None:
    async def reached() -> bool:
        async with container.db.read() as conn:
            query = select(campaigns.c.status).where(campaigns.c.id == campaign_id)
            return (await conn.execute(query)).scalar_one() == status

    await wait_for(reached, message=f"the campaign never became {status!r}")


async def batch_addresses(container: Container, campaign_id: int) -> dict[int, set[str]]:
    """Each batch's recipient addresses, by batch id."""
    query = (
        select(campaign_recipients.c.batch_id, subscribers.c.email)
        .join(subscribers, subscribers.c.id == campaign_recipients.c.subscriber_id)
        .where(campaign_recipients.c.campaign_id == campaign_id)
    )
    found: dict[int, set[str]] = {}
    async with container.db.read() as conn:
        for batch_id, email in await conn.execute(query):
            found.setdefault(int(batch_id), set()).add(str(email))
    return found


def sink_settings(database_url: str, sink: Any, **extra: Any) -> Settings:
    """Settings that send campaigns by SMTP to the test's `sink` on loopback (plain, no
    TLS), with fast queue timings; `extra` adds sections (e.g. `bulk_email={...}`)."""
    return make_settings(
        database_url,
        queue=FAST_QUEUE,
        smtp={"host": "127.0.0.1", "port": sink.port, "security": "none"},
        **real_mail(provider="smtp"),
        **extra,
    )


def batch_provider_settings(database_url: str, base_url: str, *, batch_size: int = 40) -> Settings:
    """Settings that send campaigns through the Mailgun-compatible dev provider at
    `base_url` (PRV-2), with fast queue timings."""
    return make_settings(
        database_url,
        queue=FAST_QUEUE,
        **real_mail(provider="mailgun"),
        mailgun={
            "api_key": "key-test",
            "domain": "mg.example.org",
            "api_base_url": base_url,
            "timeout_seconds": 5,
        },
        bulk_email={"batch_size": batch_size},
    )


@contextlib.asynccontextmanager
async def studio_with(
    settings: Settings, readers: int
) -> AsyncIterator[tuple[httpx.AsyncClient, Container, dict[str, str]]]:
    """The app for `settings` with an admin key, the `weekly` newsletter and `readers`
    confirmed subscribers of it."""
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", readers)
        yield client, container, headers


async def wait_for_sent(container: Container, campaign_id: int, count: int) -> None:
    """Wait until `count` recipients of the campaign are `sent` (whatever its status)."""

    async def enough() -> bool:
        return (await recipient_states(container, campaign_id)).get("sent", 0) >= count

    await wait_for(enough, message=f"fewer than {count} sent")


async def mailed_at_least(sink: Any, count: int) -> bool:
    """Whether the SMTP sink has received `count` messages (a condition for `wait_for`)."""
    return len(sink.messages) >= count


async def first_batch(conn: Any, campaign_id: int) -> int:
    """The id of the campaign's first batch (by page)."""
    query = (
        select(campaign_batches.c.id)
        .where(campaign_batches.c.campaign_id == campaign_id)
        .order_by(campaign_batches.c.page)
        .limit(1)
    )
    return int((await conn.execute(query)).scalar_one())
