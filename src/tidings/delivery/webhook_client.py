"""Sends one webhook request through the SSRF guard and classifies the response (DLV-5..7).

Every outcome is a `WebhookResponse`, never an exception: the caller records it in the delivery
log and decides by `outcome`. The whole request (waiting for a per-host slot, connecting, TLS,
sending, reading a capped body) runs under one deadline, shorter than the job's lease.
Redirects are not followed and proxy variables are never read: httpcore is used directly, with
the guard as its network backend, so no layer above it can dial somewhere unchecked.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum

import httpcore
import httpx

from tidings.delivery.ssrf import AddressBlocked, GuardedNetworkBackend, Resolver
from tidings.domain.clock import Clock


class Outcome(StrEnum):
    DELIVERED = "delivered"  # 2xx
    GONE = "gone"  # 410: the receiver asks us to stop; the caller disables the endpoint
    RETRY = "retry"  # 408, 429, 5xx, timeouts, connection errors: retry, honouring retry_after
    REJECTED = "rejected"  # other 3xx/4xx: recorded and retried on the normal schedule
    BLOCKED = "blocked"  # the guard refused the address, or the URL cannot be sent at all
    BUSY = "busy"  # every slot for this host is in use: not attempted, try again shortly


@dataclass(frozen=True, slots=True)
class WebhookResponse:
    """What one attempt produced. `error` is a short kind ("timeout", "blocked: loopback")."""

    outcome: Outcome
    status_code: int | None
    elapsed_ms: int
    body: str = ""  # the first `max_response_bytes` of the response, for the delivery log
    retry_after_seconds: float | None = None
    error: str | None = None


_RETRY_STATUSES = frozenset({408, 429})


def classify_status(status_code: int) -> Outcome:
    """The outcome an HTTP status stands for."""
    if 200 <= status_code < 300:
        return Outcome.DELIVERED
    if status_code == 410:
        return Outcome.GONE
    if status_code in _RETRY_STATUSES or status_code >= 500:
        return Outcome.RETRY
    return Outcome.REJECTED


def parse_retry_after(value: str | None, *, now: datetime, cap_seconds: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date), capped; None if
    absent or unreadable. A date in the past means "now" (0)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), cap_seconds)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; "-0000" parses as naive
        when = when.replace(tzinfo=UTC)
    return min(max((when - now).total_seconds(), 0.0), cap_seconds)


def caused_by_tls(exc: BaseException) -> bool:
    # httpcore re-raises its ConnectError "from None", so the SSLError is in the context chain.
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class _HostSlots:
    """At most `limit` concurrent requests per destination host; idle hosts cost nothing."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._semaphores: dict[str, asyncio.Semaphore] = {}
        self._users: dict[str, int] = {}

    def busy(self, host: str) -> bool:
        """True when every slot for `host` is taken: a new request would only wait."""
        semaphore = self._semaphores.get(host)
        return semaphore is not None and semaphore.locked()

    @asynccontextmanager
    async def hold(self, host: str) -> AsyncIterator[None]:
        semaphore = self._semaphores.setdefault(host, asyncio.Semaphore(self._limit))
        self._users[host] = self._users.get(host, 0) + 1
        try:
            async with semaphore:
                yield
        finally:
            self._users[host] -= 1
            if self._users[host] == 0:  # nobody holds or waits: forget the host
                del self._users[host], self._semaphores[host]


class WebhookClient:
    """Posts signed webhook bodies to user-supplied URLs, safely. One per worker process."""

    def __init__(
        self,
        *,
        clock: Clock,
        allow_private_networks: bool = False,
        deadline_seconds: float = 10.0,
        max_response_bytes: int = 65536,
        per_host_concurrency: int = 4,
        max_retry_after_seconds: float = 3600.0,
        resolver: Resolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
        user_agent: str = "tidings-webhooks/0.1",
    ) -> None:
        self._clock = clock
        self._deadline_seconds = deadline_seconds
        self._max_response_bytes = max_response_bytes
        self._max_retry_after_seconds = max_retry_after_seconds
        self._user_agent = user_agent
        self._slots = _HostSlots(per_host_concurrency)
        self._pool = httpcore.AsyncConnectionPool(
            # Not read from SSL_CERT_FILE & co.: the environment configures nothing here.
            ssl_context=ssl_context or httpx.create_ssl_context(trust_env=False),
            # No global cap: the per-host slots bound concurrency, and a global cap is exactly
            # what would let one slow host starve the others.
            max_connections=None,
            max_keepalive_connections=32,
            keepalive_expiry=30.0,
            network_backend=GuardedNetworkBackend(
                allow_private_networks=allow_private_networks, resolver=resolver
            ),
        )

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> WebhookResponse:
        """POST `body` to `url` with `headers` (the signature headers among them)."""
        started = time.monotonic()

        def elapsed_ms() -> int:
            return round((time.monotonic() - started) * 1000)

        try:
            target = httpx.URL(url)
        except httpx.InvalidURL:
            return WebhookResponse(Outcome.BLOCKED, None, elapsed_ms(), error="invalid url")
        if target.scheme not in ("http", "https") or not target.host:
            return WebhookResponse(Outcome.BLOCKED, None, elapsed_ms(), error="invalid url")

        host = target.host.removesuffix(".")
        if self._slots.busy(host):
            # Don't queue behind a slow host while holding a worker slot: the caller defers
            # this delivery, and deliveries to other hosts keep flowing (DLV-7).
            return WebhookResponse(Outcome.BUSY, None, elapsed_ms(), error="host busy")
        try:
            async with asyncio.timeout(self._deadline_seconds):
                async with self._slots.hold(host):
                    status, retry_after, text = await self._send(target, body, headers)
        except AddressBlocked as exc:
            return WebhookResponse(
                Outcome.BLOCKED, None, elapsed_ms(), error=f"blocked: {exc.reason}"
            )
        except (TimeoutError, httpcore.TimeoutException):
            return WebhookResponse(Outcome.RETRY, None, elapsed_ms(), error="timeout")
        except httpcore.ConnectError as exc:
            # A certificate problem needs the receiver's admin, not patience: say which it is.
            kind = "tls error" if caused_by_tls(exc) else "connect error"
            return WebhookResponse(Outcome.RETRY, None, elapsed_ms(), error=kind)
        except (httpcore.NetworkError, httpcore.ProtocolError):
            return WebhookResponse(Outcome.RETRY, None, elapsed_ms(), error="network error")

        outcome = classify_status(status)
        return WebhookResponse(
            outcome,
            status,
            elapsed_ms(),
            body=text,
            retry_after_seconds=(
                parse_retry_after(
                    retry_after, now=self._clock(), cap_seconds=self._max_retry_after_seconds
                )
                if outcome is Outcome.RETRY
                else None
            ),
        )

    async def _send(
        self, target: httpx.URL, body: bytes, headers: Mapping[str, str]
    ) -> tuple[int, str | None, str]:
        """Status, Retry-After and the capped body text of one request."""
        # Keyed by lower-case name so a caller's "content-type" replaces ours instead of doubling.
        request_headers = {
            "user-agent": self._user_agent,
            "content-type": "application/json",
            **{name.lower(): value for name, value in headers.items()},
            "host": target.netloc.decode("ascii"),
            # Compressed bodies could expand far past the cap before we could stop reading.
            "accept-encoding": "identity",
        }
        url = httpcore.URL(
            scheme=target.raw_scheme,
            host=target.raw_host,
            port=target.port,
            target=target.raw_path,
        )
        # Per-phase timeouts never fire before the whole-request deadline; they are a backstop.
        phase = self._deadline_seconds
        timeouts = {"connect": phase, "read": phase, "write": phase, "pool": phase}
        async with self._pool.stream(
            "POST",
            url,
            headers=list(request_headers.items()),
            content=body,
            extensions={"timeout": timeouts},
        ) as response:
            received = bytearray()
            async for chunk in response.aiter_stream():
                received += chunk
                if len(received) >= self._max_response_bytes:
                    break  # leaving the block closes the connection mid-body
            retry_after = next(
                (
                    value.decode("latin-1")
                    for name, value in response.headers
                    if name.lower() == b"retry-after"
                ),
                None,
            )
            text = bytes(received[: self._max_response_bytes]).decode("utf-8", errors="replace")
            return response.status, retry_after, text

    async def aclose(self) -> None:
        await self._pool.aclose()
