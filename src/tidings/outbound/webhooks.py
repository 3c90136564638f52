"""Webhook endpoints, event publication through the outbox, and the `deliver_webhook` job.

An event is published inside the transaction of the change it reports: one delivery row and
one queued job per subscribed endpoint, so a committed change always gets its webhooks and a
rolled-back one never does (PRI-6). Delivery is at-least-once; receivers deduplicate on the
`webhook-id` header, which stays the same across retries and replays.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from secrets import token_hex
from typing import Any, ClassVar

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.delivery.signing import generate_secret, sign_headers
from tidings.delivery.ssrf import validated_url
from tidings.delivery.webhook_client import Outcome, WebhookClient
from tidings.domain.clock import Clock
from tidings.domain.errors import Conflict, InvalidInput, NotFound
from tidings.domain.jobs import Defer, GiveUp, JobStatus, RetryLater
from tidings.domain.webhook_events import (
    WEBHOOK_EVENT_TYPES,
    validate_event_types,
    webhook_delivery_key,
)
from tidings.queue import store as job_store
from tidings.queue.job import Job, JobPayload
from tidings.queue.service import JobQueue
from tidings.storage import webhooks as queries
from tidings.storage.database import Database
from tidings.storage.webhooks import DeliveryRow, NewEvent
from tidings.storage.webhooks import EndpointRow as EndpointRow  # the use case's answer

DELIVER_WEBHOOK = "deliver_webhook"
HOST_BUSY_RETRY_SECONDS = 1.0
log = structlog.get_logger("tidings.webhooks")


@dataclass(frozen=True, slots=True)
class DeliverWebhook(JobPayload):
    """The `deliver_webhook` job: which delivery row to attempt (it holds event and payload).

    `event_id` pins the row: on SQLite a deleted delivery's id can come back on a new row, and
    a job left over from the old one must not deliver the new one."""

    kind: ClassVar[str] = DELIVER_WEBHOOK
    delivery_id: int
    event_id: str | None = None  # None in jobs queued before it was recorded


def _new_event(event_type: str, data: dict[str, Any], now: datetime) -> NewEvent:
    """An event with a fresh id: the time in milliseconds, then 80 random bits. Ids made later
    sort later, so a bulk publication appends to the delivery index instead of scattering."""
    stamp = int(now.timestamp() * 1000)
    return NewEvent(
        event_id=f"msg_{stamp:012x}{token_hex(10)}",
        event_type=event_type,
        payload={"type": event_type, "timestamp": now.isoformat(), "data": data},
    )


def _validated_events(event_types: list[str]) -> list[str]:
    try:
        return validate_event_types(event_types)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="event_types") from None


class Webhooks:
    def __init__(
        self,
        db: Database,
        queue: JobQueue,
        now: Clock,
        *,
        rotation_overlap: timedelta,
        allow_private_networks: bool = False,
    ) -> None:
        self._db = db
        self._queue = queue
        self._now = now
        self._rotation_overlap = rotation_overlap
        self._allow_private_networks = allow_private_networks

    def _url(self, url: str) -> str:
        return validated_url(
            url, allow_private_networks=self._allow_private_networks, refused_by="webhooks"
        )

    # -- endpoints ---------------------------------------------------------------------

    async def create_endpoint(
        self,
        url: str,
        event_types: list[str],
        description: str = "",
        *,
        include_imports: bool = True,
    ) -> EndpointRow:
        now = self._now()
        async with self._db.write() as conn:
            return await queries.insert_endpoint(
                conn,
                url=self._url(url),
                description=description,
                event_types=_validated_events(event_types),
                enabled=True,
                include_imports=include_imports,
                secret=generate_secret(),
                created_at=now,
                updated_at=now,
            )

    async def get_endpoint(self, endpoint_id: int) -> EndpointRow:
        async with self._db.read() as conn:
            endpoint = await queries.get_endpoint(conn, endpoint_id)
        if endpoint is None:
            raise NotFound(f"no webhook endpoint with id {endpoint_id}")
        return endpoint

    async def list_endpoints(self, *, after_id: int | None, limit: int) -> list[EndpointRow]:
        async with self._db.read() as conn:
            return await queries.list_endpoints(conn, after_id=after_id, limit=limit)

    async def update_endpoint(
        self,
        endpoint_id: int,
        *,
        url: str | None = None,
        event_types: list[str] | None = None,
        description: str | None = None,
        enabled: bool | None = None,
        include_imports: bool | None = None,
    ) -> EndpointRow:
        values: dict[str, Any] = {"updated_at": self._now()}
        if include_imports is not None:
            values["include_imports"] = include_imports
        if url is not None:
            values["url"] = self._url(url)
        if event_types is not None:
            values["event_types"] = _validated_events(event_types)
        if description is not None:
            values["description"] = description
        if enabled is not None:
            values["enabled"] = enabled
            values["disabled_reason"] = None if enabled else "disabled by an admin"
        async with self._db.write() as conn:
            updated = await queries.update_endpoint(conn, endpoint_id, **values)
        if updated is None:
            raise NotFound(f"no webhook endpoint with id {endpoint_id}")
        return updated

    async def rotate_secret(self, endpoint_id: int) -> EndpointRow:
        """A new secret; the old one keeps signing too for the overlap, so receivers can
        switch over without rejecting deliveries in between."""
        now = self._now()
        async with self._db.write() as conn:
            current = await queries.get_endpoint(conn, endpoint_id)
            if current is None:
                raise NotFound(f"no webhook endpoint with id {endpoint_id}")
            rotated = await queries.update_endpoint(
                conn,
                endpoint_id,
                secret=generate_secret(),
                previous_secret=current.secret,
                previous_secret_expires_at=now + self._rotation_overlap,
                updated_at=now,
            )
        assert rotated is not None
        return rotated

    async def delete_endpoint(self, endpoint_id: int) -> None:
        async with self._db.write() as conn:
            if not await queries.delete_endpoint(conn, endpoint_id):
                raise NotFound(f"no webhook endpoint with id {endpoint_id}")

    # -- events and deliveries -----------------------------------------------------------

    async def publish(self, conn: AsyncConnection, event_type: str, data: dict[str, Any]) -> int:
        """Queue `event_type` for every enabled endpoint that wants it, inside the caller's
        transaction. Returns how many deliveries were queued."""
        return await self.publish_many(conn, [(event_type, data)])

    async def publish_many(
        self,
        conn: AsyncConnection,
        events: Sequence[tuple[str, dict[str, Any]]],
        *,
        from_import: bool = False,
    ) -> int:
        """Queue many events (type, data) inside the caller's transaction, in a few set-based
        statements whatever their number: per event type, a delivery to each endpoint that
        wants it and the deliveries' jobs. `from_import`: a CSV import caused them, so
        endpoints that opted out of import events get none. Returns deliveries queued."""
        unknown = {event_type for event_type, _ in events} - WEBHOOK_EVENT_TYPES.keys()
        if unknown:
            raise ValueError(f"unknown event type(s) {sorted(unknown)!r}")
        if not events:
            return 0
        endpoints = await queries.enabled_endpoints(conn)
        if not endpoints:
            return 0
        now = self._now()
        by_type: dict[str, list[NewEvent]] = {}
        for event_type, data in events:
            by_type.setdefault(event_type, []).append(_new_event(event_type, data, now))
        queued = 0
        for event_type, typed in by_type.items():
            wanted = [
                e.id for e in endpoints if e.subscribes_to(event_type, from_import=from_import)
            ]
            queued += await self._queue_deliveries(conn, typed, wanted)
        return queued

    async def send_test(self, endpoint_id: int) -> DeliveryRow:
        async with self._db.write() as conn:
            endpoint = await queries.get_endpoint(conn, endpoint_id)
            if endpoint is None:
                raise NotFound(f"no webhook endpoint with id {endpoint_id}")
            event = _new_event("webhook.test", {"endpoint_id": endpoint_id}, self._now())
            await self._queue_deliveries(conn, [event], [endpoint_id])
            delivery = await queries.get_delivery_of(conn, event.event_id, endpoint_id)
        assert delivery is not None
        return delivery

    async def _queue_deliveries(
        self, conn: AsyncConnection, events: list[NewEvent], endpoint_ids: list[int]
    ) -> int:
        """A delivery row and a `deliver_webhook` job per event and endpoint (PRI-6)."""
        if not endpoint_ids:
            return 0
        jobs = await queries.deliveries_to_enqueue(conn, events, endpoint_ids, now=self._now())
        return await self._queue.enqueue_many(conn, DELIVER_WEBHOOK, jobs)

    async def prune_deliveries(self, *, older_than: timedelta) -> int:
        """Forget finished deliveries (payloads carry subscriber data) past the retention."""
        removed = 0
        while True:
            async with self._db.write() as conn:
                batch = await queries.prune_deliveries(
                    conn, before=self._now() - older_than, batch=1000
                )
            removed += batch
            if batch < 1000:
                return removed

    async def list_deliveries(
        self, endpoint_id: int, *, before_id: int | None, limit: int
    ) -> list[DeliveryRow]:
        await self.get_endpoint(endpoint_id)
        async with self._db.read() as conn:
            return await queries.list_deliveries(
                conn, endpoint_id, before_id=before_id, limit=limit
            )

    async def replay_delivery(self, delivery_id: int) -> DeliveryRow:
        """Send a delivery again (same `webhook-id`, so receivers can tell it is a repeat)."""
        now = self._now()
        async with self._db.write() as conn:
            delivery = await queries.get_delivery(conn, delivery_id)
            if delivery is None:
                raise NotFound(f"no webhook delivery with id {delivery_id}")
            key = webhook_delivery_key(delivery.event_id, delivery.endpoint_id)
            job = await job_store.get_by_key(conn, key)
            if job is not None and job.status is JobStatus.RUNNING:
                raise Conflict("the delivery is being attempted right now; try again shortly")
            await queries.reset_delivery(conn, delivery_id, now=now)
            if job is None:  # pruned after retention: a fresh job, same delivery and webhook-id
                fresh = DeliverWebhook(delivery_id, delivery.event_id)
                replay_key = f"{key}:replay:{uuid.uuid4().hex}"
                await self._queue.enqueue(conn, fresh.kind, replay_key, fresh.to_payload())
            else:
                await job_store.replay(conn, job.id, now=now)
            refreshed = await queries.get_delivery(conn, delivery_id)
        assert refreshed is not None
        return refreshed


class WebhookJobHandler:
    """Runs one `deliver_webhook` job: sign, send through the SSRF-safe client, classify.

    What it writes — the attempt on the delivery row, and disabling the endpoint after a 410 —
    goes through the queue's fenced write (DLV-2): a worker that stalled past its lease while
    another reclaimed the job gets `ClaimLost` and writes nothing."""

    def __init__(self, queue: JobQueue, client: Callable[[], WebhookClient], now: Clock) -> None:
        self._queue = queue
        # Asked for at the first delivery: a worker of an install without webhooks never
        # builds the client (its TLS context alone is 0.8 MB).
        self._client = client
        self._now = now

    async def __call__(self, job: Job) -> None:
        payload = DeliverWebhook.from_job(job)
        delivery_id = payload.delivery_id
        async with self._queue.db.read() as conn:
            delivery = await queries.get_delivery(conn, delivery_id)
            if delivery is not None and payload.event_id not in (None, delivery.event_id):
                delivery = None  # the job's delivery was deleted and its id reused
            endpoint = (
                None if delivery is None else await queries.get_endpoint(conn, delivery.endpoint_id)
            )
        if delivery is None or endpoint is None:
            raise GiveUp("the delivery or its endpoint was deleted")
        if not endpoint.enabled:
            async with self._queue.fenced(job) as conn:
                await self._record(conn, delivery_id, "failed", None, "endpoint disabled", None)
            raise GiveUp("endpoint disabled")
        now = self._now()
        secrets = [endpoint.secret]
        expires = endpoint.previous_secret_expires_at
        if endpoint.previous_secret and expires is not None and expires > now:
            secrets.append(endpoint.previous_secret)
        body = json.dumps(delivery.payload, separators=(",", ":")).encode()
        headers = {
            **sign_headers(delivery.event_id, now, body, secrets),
            "content-type": "application/json",
        }
        response = await self._client().post(endpoint.url, body, headers)
        if response.outcome is Outcome.BUSY:
            raise Defer("destination host busy", seconds=HOST_BUSY_RETRY_SECONDS)
        status = {
            Outcome.DELIVERED: "delivered",
            Outcome.GONE: "gone",
            Outcome.BLOCKED: "blocked",
        }.get(response.outcome, "failed")
        async with self._queue.fenced(job) as conn:
            await self._record(
                conn,
                delivery_id,
                status,
                response.status_code,
                response.error,
                response.body or None,
            )
            if response.outcome is Outcome.GONE:
                await queries.update_endpoint(
                    conn,
                    endpoint.id,
                    enabled=False,
                    disabled_reason="the receiver answered 410 Gone",
                    updated_at=self._now(),
                )
        log.info(
            "webhook.attempt",
            endpoint_id=endpoint.id,
            delivery_id=delivery_id,
            outcome=response.outcome.value,
            status_code=response.status_code,
            elapsed_ms=response.elapsed_ms,
        )
        if response.outcome is Outcome.DELIVERED:
            return
        if response.outcome is Outcome.GONE:
            log.warning("webhook.endpoint_disabled", endpoint_id=endpoint.id, reason="gone")
            raise GiveUp("receiver answered 410 Gone; endpoint disabled")
        if response.outcome is Outcome.BLOCKED:
            raise GiveUp(f"blocked by the SSRF guard: {response.error}")
        reason = f"status {response.status_code}" if response.status_code else response.error
        raise RetryLater(
            f"webhook {response.outcome.value}: {reason}",
            retry_after_seconds=response.retry_after_seconds,
        )

    async def _record(
        self,
        conn: AsyncConnection,
        delivery_id: int,
        status: str,
        status_code: int | None,
        error: str | None,
        excerpt: str | None,
    ) -> None:
        await queries.record_attempt(
            conn,
            delivery_id,
            status=status,
            status_code=status_code,
            error=error[:200] if error else None,
            response_excerpt=excerpt,
            now=self._now(),
        )
