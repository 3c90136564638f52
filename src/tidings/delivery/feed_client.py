"""Reads an RSS or Atom feed over HTTP through the SSRF guard (AUT-2): conditional requests,
redirects re-checked at every hop, a size cap and one deadline for the whole read.

The URL is user input, so the request goes through httpx over an httpcore pool whose network
backend is the guard (`ssrf.GuardedNetworkBackend`): every connection, the first and each
redirect's, dials an address the guard checked. Redirects are followed here, one hop at a
time, so each new URL's scheme and literal host are refused before anything is dialed; proxy
variables are never read. The body is read until the cap and no further.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass

import httpcore
import httpx

from tidings.delivery.feed_parsing import FeedDocument, FeedUnavailable, parse_feed
from tidings.delivery.ssrf import (
    CLOUD_METADATA,
    UNPARSEABLE,
    AddressBlocked,
    GuardedNetworkBackend,
    Resolver,
    address_literal,
    refusal,
)
from tidings.delivery.webhook_client import caused_by_tls

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
ACCEPT = (
    "application/atom+xml, application/rss+xml, application/xml;q=0.9, text/xml;q=0.9, */*;q=0.1"
)


@dataclass(frozen=True, slots=True)
class Validators:
    """The feed's ETag and Last-Modified from its last full answer, sent back as
    If-None-Match and If-Modified-Since so an unchanged feed costs a 304."""

    etag: str | None = None
    last_modified: str | None = None


@dataclass(frozen=True, slots=True)
class FeedRead:
    """One read: `document` is None when the server answered 304 Not Modified."""

    document: FeedDocument | None
    validators: Validators
    final_url: str
    size: int


class _GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport (its exception mapping and streams) over a pool whose network
    backend is the SSRF guard."""

    def __init__(self, backend: httpcore.AsyncNetworkBackend, ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=ssl_context, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=16,
            max_keepalive_connections=4,
            keepalive_expiry=30.0,
            network_backend=backend,
        )


class FeedClient:
    """Reads feeds safely. One per process; `aclose` when done."""

    def __init__(
        self,
        *,
        allow_private_networks: bool = False,
        timeout_seconds: float = 15.0,
        max_bytes: int = 5_000_000,
        max_redirects: int = 5,
        resolver: Resolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
        user_agent: str = "tidings-feeds/0.1",
    ) -> None:
        self._allow_private_networks = allow_private_networks
        self._timeout_seconds = timeout_seconds
        self._max_bytes = max_bytes
        self._max_redirects = max_redirects
        context = ssl_context or httpx.create_ssl_context(trust_env=False)
        backend = GuardedNetworkBackend(
            allow_private_networks=allow_private_networks, resolver=resolver
        )
        self._http = httpx.AsyncClient(
            transport=_GuardedTransport(backend, context),
            follow_redirects=False,  # followed in `_get`, each hop checked
            trust_env=False,
            timeout=timeout_seconds,
            headers={"user-agent": user_agent, "accept": ACCEPT},
        )

    async def read(self, url: str, validators: Validators = Validators()) -> FeedRead:
        """Fetch and parse the feed at `url`; `FeedUnavailable` saying why when it cannot."""
        try:
            async with asyncio.timeout(self._timeout_seconds):
                return await self._get(url, validators)
        except TimeoutError:
            raise FeedUnavailable(
                f"no complete answer within {self._timeout_seconds:g} seconds"
            ) from None
        except AddressBlocked as blocked:
            raise FeedUnavailable(_blocked_detail(blocked.reason)) from None
        except httpx.TimeoutException:
            raise FeedUnavailable(
                f"no complete answer within {self._timeout_seconds:g} seconds"
            ) from None
        except httpx.ConnectError as exc:
            kind = "a TLS error" if caused_by_tls(exc) else "could not connect"
            raise FeedUnavailable(f"{kind} ({type(exc).__name__})") from None
        except httpx.HTTPError as exc:
            raise FeedUnavailable(f"the connection failed ({type(exc).__name__})") from None

    async def _get(self, url: str, validators: Validators) -> FeedRead:
        headers = {"accept-encoding": "gzip, deflate"}
        if validators.etag:
            headers["if-none-match"] = validators.etag
        if validators.last_modified:
            headers["if-modified-since"] = validators.last_modified
        target = self._checked(url)
        for _hop in range(self._max_redirects + 1):
            async with self._http.stream("GET", target, headers=headers) as response:
                if response.status_code in _REDIRECTS:
                    location = response.headers.get("location")
                    if not location:
                        raise FeedUnavailable(f"HTTP {response.status_code} without a Location")
                    target = self._checked(str(target.join(location)), redirected=True)
                    continue
                if response.status_code == 304:
                    return FeedRead(None, validators, str(target), 0)
                if response.status_code != 200:
                    raise FeedUnavailable(f"HTTP {response.status_code} from the feed's server")
                body = await self._capped_body(response)
                fresh = Validators(
                    response.headers.get("etag"), response.headers.get("last-modified")
                )
                return FeedRead(parse_feed(body, str(target)), fresh, str(target), len(body))
        raise FeedUnavailable(f"more than {self._max_redirects} redirects")

    async def _capped_body(self, response: httpx.Response) -> bytes:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max_bytes:
            raise FeedUnavailable(self._too_large())
        received = bytearray()
        # Decoded bytes are counted, so a small gzip bomb stops at the cap like a plain body.
        async for chunk in response.aiter_bytes():
            received += chunk
            if len(received) > self._max_bytes:
                raise FeedUnavailable(self._too_large())  # leaving closes the connection
        return bytes(received)

    def _too_large(self) -> str:
        return f"the feed is larger than feeds.max_bytes ({self._max_bytes:,} bytes)"

    def _checked(self, url: str, *, redirected: bool = False) -> httpx.URL:
        """`url` as an http(s) URL whose host, if an IP literal, the guard allows; names are
        checked when dialed."""
        where = "redirected to" if redirected else "the URL is"
        try:
            target = httpx.URL(url)
        except httpx.InvalidURL:
            raise FeedUnavailable(f"{where} an invalid URL") from None
        if target.scheme not in ("http", "https") or not target.host:
            raise FeedUnavailable(f"{where} a URL that is not http(s)")
        try:
            literal = address_literal(target.host)
        except AddressBlocked as blocked:
            raise FeedUnavailable(_blocked_detail(blocked.reason)) from None
        if literal is not None:
            reason = refusal(literal, allow_private_networks=self._allow_private_networks)
            if reason is not None:
                prefix = "redirected to " if redirected else ""
                raise FeedUnavailable(prefix + _blocked_detail(reason))
        return target

    async def aclose(self) -> None:
        await self._http.aclose()


def _blocked_detail(reason: str) -> str:
    hint = (
        ""
        if reason in (CLOUD_METADATA, UNPARSEABLE)
        else " (a feed on your own network needs webhooks.allow_private_networks = true)"
    )
    return f"a {reason} address, which feeds are never read from{hint}"
