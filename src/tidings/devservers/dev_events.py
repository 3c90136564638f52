"""The dev provider hears back too (PRV-4, PRV-6): after accepting a message it posts signed
Mailgun events for it to a webhook URL, as Mailgun does — `delivered` for most recipients, and
for local parts chosen by prefix a bounce or a complaint:

| local part | events posted |
| --- | --- |
| `bounce-*` | `failed`, severity `permanent`, code 550 (a hard bounce) |
| `softbounce-*` | `failed`, severity `temporary`, code 452 (a soft bounce) |
| `complain-*` | `delivered`, then `complained` |
| anything else | `delivered` |

Events go out from one background task, in order, each retried a few times on a 5xx or a
lost connection (Mailgun retries for hours; a dev server gives up sooner). A 4xx answer is
final, as it is for Mailgun.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

import httpx

from tidings.delivery.mailgun_events import event_data, signed_body

ATTEMPTS = 4
RETRY_PAUSE_SECONDS = 0.2
DRAIN_SECONDS = 5.0


def events_for(address: str) -> list[tuple[str, str | None, int | None, str]]:
    """(event, severity, code, description) of each event the dev provider posts for
    `address`, by its local part's prefix."""
    local = address.rpartition("@")[0].lower()
    if local.startswith("bounce-"):
        return [("failed", "permanent", 550, "5.1.1 The email account does not exist (dev)")]
    if local.startswith("softbounce-"):
        return [("failed", "temporary", 452, "4.2.2 Mailbox full (dev)")]
    if local.startswith("complain-"):
        return [("delivered", None, 250, ""), ("complained", None, None, "")]
    return [("delivered", None, 250, "")]


class EventPoster:
    """Posts signed events for accepted recipients to `url`; `stats` counts outcomes."""

    def __init__(
        self,
        url: str,
        signing_key: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url
        self._key = signing_key
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._client = httpx.AsyncClient(timeout=10, transport=transport)
        self._task: asyncio.Task[None] | None = None
        self.stats: Counter[str] = Counter()

    def enqueue(self, recipients: Sequence[tuple[str, str]]) -> None:
        """(address, Message-ID) of recipients just accepted."""
        if self._task is None:
            self._task = asyncio.create_task(self._run())
        for recipient in recipients:
            self._queue.put_nowait(recipient)

    async def drain(self, within_seconds: float = DRAIN_SECONDS) -> None:
        """Wait until every queued event is posted (or given up on)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within_seconds):
                await self._queue.join()

    async def close(self) -> None:
        await self.drain()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._client.aclose()

    async def _run(self) -> None:
        while True:
            address, message_id = await self._queue.get()
            try:
                for event, severity, code, description in events_for(address):
                    data = event_data(
                        event,
                        address,
                        event_id=secrets.token_urlsafe(16),
                        occurred_at=datetime.now(UTC),
                        message_id=message_id,
                        severity=severity,
                        code=code,
                        description=description,
                    )
                    await self._post(data)
            finally:
                self._queue.task_done()

    async def _post(self, data: dict[str, object]) -> None:
        for attempt in range(ATTEMPTS):
            body = signed_body(self._key, data, now=datetime.now(UTC))  # fresh token each try
            try:
                response = await self._client.post(
                    self.url, content=body, headers={"content-type": "application/json"}
                )
            except httpx.HTTPError:
                status = None
            else:
                status = response.status_code
            if status is not None and status < 500:
                self.stats["posted" if status < 300 else f"refused_{status}"] += 1
                return
            if attempt + 1 < ATTEMPTS:
                await asyncio.sleep(RETRY_PAUSE_SECONDS * 2**attempt)
        self.stats["failed"] += 1
