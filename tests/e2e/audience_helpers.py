"""Helpers for audience tests: a newsletter, the confirmation link from the sent email,
and a snapshot of audience tables to prove bad input changed nothing."""

from __future__ import annotations

import re
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default as default_policy
from typing import Any

import httpx
from sqlalchemy import select

from tests.support.waiting import wait_for
from tidings.audience.consent_requests import REQUEST_CONSENT
from tidings.audience.subscriber_mail import SEND_SUBSCRIBER_EMAIL
from tidings.bootstrap import Container
from tidings.outbound.email_jobs import SEND_EMAIL
from tidings.queue.policy import HandlerRegistry
from tidings.queue.worker import Worker
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


async def deliver_queued_mail(container: Container) -> None:
    """Run every due audience job (subscribe requests, confirmation and other mail) through
    the real handlers and the configured provider (the local capture unless a test says
    otherwise), until none is left: what a worker does, without webhooks and campaigns."""
    chosen = HandlerRegistry()
    for registration in container.handler_registry():
        if registration.kind in (REQUEST_CONSENT, SEND_EMAIL, SEND_SUBSCRIBER_EMAIL):
            chosen.register(
                registration.kind, registration.handler, concurrency=registration.concurrency
            )
    worker = Worker(container.db, chosen, container.queue.policy, container.clock)
    try:
        while True:
            worker.wake()  # a handler may have queued another kind: look at every kind again
            if not await worker.claim_round():
                return
            await worker.drain(30)
    finally:
        await worker.drain(0)  # writes what is reported and closes the round connection


def captured_text(raw: bytes) -> str:
    """The plain-text part of a captured message, decoded (links are not split)."""
    message = BytesParser(policy=default_policy).parsebytes(raw)
    assert isinstance(message, EmailMessage)
    part = message.get_body(preferencelist=("plain",))
    assert part is not None
    return str(part.get_content())


async def confirmation_tokens(container: Container) -> list[str]:
    """Tokens from every confirmation email sent, oldest first: queued ones are sent first
    (the token exists only once the mail is rendered for sending)."""
    await deliver_queued_mail(container)
    found = []
    for message in reversed(await container.captured_mail.list(limit=1000)):
        match = CONFIRM_LINK.search(captured_text(message.raw))
        if match:
            found.append(match.group(1))
    return found


async def settled(container: Container) -> None:
    """Wait until the workers have finished every job and delivered every webhook."""

    async def idle() -> bool:
        async with container.db.read() as conn:
            busy = (
                await conn.execute(
                    select(jobs.c.id).where(jobs.c.status.in_(["pending", "running"]))
                )
            ).first()
            undelivered = (
                await conn.execute(
                    select(webhook_deliveries.c.id).where(webhook_deliveries.c.status == "pending")
                )
            ).first()
        return busy is None and undelivered is None

    await wait_for(idle, within_seconds=60, message="the workers did not settle")


async def sent_confirmation_token(container: Container) -> str:
    """The link from the first confirmation email the running workers send."""

    async def token() -> str | None:
        for message in await container.captured_mail.list():
            match = CONFIRM_LINK.search(captured_text(message.raw))
            if match:
                return match.group(1)
        return None

    return await wait_for(token, message="no confirmation email was sent")


async def snapshot(container: Container) -> dict[str, list[tuple[Any, ...]]]:
    """Rows of every table a public or admin audience request could change (the rate-limit
    table is left out: counting a refused request is the point of it)."""
    tables = (newsletters, subscribers, subscriptions, suppressions, jobs, webhook_deliveries)
    async with container.db.read() as conn:
        return {
            table.name: sorted(tuple(row) for row in await conn.execute(select(table)))
            for table in tables
        }
