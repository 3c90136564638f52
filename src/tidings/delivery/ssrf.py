"""The SSRF guard: a network backend that refuses to dial private, loopback and metadata addresses.

Webhook URLs are user input. The guard sits where httpcore opens a TCP connection, so it sees the
address actually dialed: it resolves the name once through an injectable resolver, checks every
answer, and connects to the checked IP itself, so a second (rebinding) lookup never happens.
TLS is untouched: httpcore still passes the URL's hostname as SNI and verifies against it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Iterable
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import Any
from urllib.parse import urlsplit

import httpcore

from tidings.domain.errors import InvalidInput, TidingsError

IPAddress = IPv4Address | IPv6Address

# `async def resolve(host, port) -> ["192.0.2.1", ...]`. Injectable so tests can fake DNS.
Resolver = Callable[[str, int], Awaitable[list[str]]]

LOOPBACK = "loopback"
PRIVATE = "private"
LINK_LOCAL = "link-local"
CLOUD_METADATA = "cloud metadata"
CGNAT = "carrier-grade NAT"
MULTICAST = "multicast"
RESERVED = "reserved"
BROADCAST = "broadcast"
UNSPECIFIED = "unspecified"
UNPARSEABLE = "unparseable address"

# Order matters: the first match names the reason (the metadata host before link-local).
_IPV4_RANGES: tuple[tuple[IPv4Network, str], ...] = tuple(
    (IPv4Network(network), reason)
    for network, reason in (
        ("0.0.0.0/32", UNSPECIFIED),
        ("169.254.169.254/32", CLOUD_METADATA),  # AWS, GCP, Azure, OpenStack, ...
        ("100.100.100.200/32", CLOUD_METADATA),  # Alibaba Cloud
        ("255.255.255.255/32", BROADCAST),
        ("127.0.0.0/8", LOOPBACK),
        ("10.0.0.0/8", PRIVATE),
        ("172.16.0.0/12", PRIVATE),
        ("192.168.0.0/16", PRIVATE),
        ("169.254.0.0/16", LINK_LOCAL),
        ("100.64.0.0/10", CGNAT),
        ("224.0.0.0/4", MULTICAST),
        ("0.0.0.0/8", RESERVED),
        ("240.0.0.0/4", RESERVED),
        ("192.0.0.0/24", RESERVED),
        ("192.0.2.0/24", RESERVED),
        ("192.88.99.0/24", RESERVED),  # the retired 6to4 relay anycast
        ("198.18.0.0/15", RESERVED),
        ("198.51.100.0/24", RESERVED),
        ("203.0.113.0/24", RESERVED),
    )
)
_IPV6_RANGES: tuple[tuple[IPv6Network, str], ...] = tuple(
    (IPv6Network(network), reason)
    for network, reason in (
        ("::/128", UNSPECIFIED),
        ("::1/128", LOOPBACK),
        ("fd00:ec2::254/128", CLOUD_METADATA),  # AWS IMDS over IPv6
        ("fc00::/7", PRIVATE),
        ("fec0::/10", PRIVATE),  # deprecated site-local
        ("fe80::/10", LINK_LOCAL),
        ("ff00::/8", MULTICAST),
        ("64:ff9b:1::/48", RESERVED),  # local-use NAT64: its translator is on our network
        ("100::/64", RESERVED),
        ("2001::/32", RESERVED),  # Teredo tunnels to an obfuscated IPv4 address
        ("2001:db8::/32", RESERVED),
    )
)
_NAT64 = IPv6Network("64:ff9b::/96")
_IPV4_TRANSLATED = IPv6Network("::ffff:0:0:0/96")
# WHATWG: a host whose last label is a number is an IPv4 address, in whatever base.
MAX_URL_LENGTH = 2000
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$", re.IGNORECASE)


class AddressBlocked(TidingsError):
    """The guard refused to connect. `reason` names the range ("loopback") and is safe to log."""

    code = "webhook_address_blocked"
    title = "The webhook address is not allowed"

    def __init__(self, reason: str) -> None:
        super().__init__(f"Refusing to connect to a {reason} address")
        self.reason = reason


def is_forbidden_address(address: IPAddress | str) -> str | None:
    """Why this address must not be dialed ("loopback", "private", ...), or None if it is public."""
    try:
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    except ValueError:
        return UNPARSEABLE
    if isinstance(ip, IPv4Address):
        return _ipv4_reason(ip)
    if ip.scope_id is not None:
        ip = IPv6Address(int(ip))  # a zone index does not change which range the address is in
    embedded = _embedded_ipv4(ip)
    if embedded is not None:
        # These forms reach the embedded IPv4 address, so it alone decides.
        return _ipv4_reason(embedded)
    for network, reason in _IPV6_RANGES:
        if ip in network:
            return reason
    return None if ip.is_global else RESERVED


def _ipv4_reason(ip: IPv4Address) -> str | None:
    for network, reason in _IPV4_RANGES:
        if ip in network:
            return reason
    # A catch-all for special-purpose blocks not listed above.
    return None if ip.is_global else RESERVED


def refusal(ip: IPAddress | str, *, allow_private_networks: bool) -> str | None:
    """Why the guard's policy refuses this address ("loopback", ...), or None."""
    reason = is_forbidden_address(ip)
    # Relaxing for self-hosted networks still never reaches the cloud's credential service.
    if allow_private_networks and reason not in (CLOUD_METADATA, UNPARSEABLE):
        return None
    return reason


def literal_host_refusal(host: str, *, allow_private_networks: bool) -> str | None:
    """For a URL being saved: why its host, if an IP literal (in any form a resolver reads),
    would be refused at connect time; None for a name (checked when dialed) or an allowed IP."""
    try:
        literal = address_literal(host)
    except AddressBlocked as blocked:
        return blocked.reason
    if literal is None:
        return None
    return refusal(literal, allow_private_networks=allow_private_networks)


def validated_url(url: str, *, allow_private_networks: bool, refused_by: str) -> str:
    """An absolute http(s) URL without credentials whose host, if an IP literal, the guard
    would dial; InvalidInput (field `url`) otherwise. Names are checked when dialed (DNS can
    change); a literal never will. `refused_by` names who dials it ("webhooks", "feeds")."""
    url = url.strip()
    try:
        parts = urlsplit(url)
        hostname, _port = parts.hostname, parts.port  # both raise on `[zz]` or `:99999`
    except ValueError:
        raise InvalidInput(
            "url is not a valid URL (check the host and port)", field="url"
        ) from None
    if len(url) > MAX_URL_LENGTH or parts.scheme not in ("http", "https") or not hostname:
        raise InvalidInput("url must be an absolute http(s) URL", field="url")
    if parts.username or parts.password:
        raise InvalidInput("url must not carry credentials", field="url")
    if any(not ch.isprintable() or ch.isspace() for ch in url):
        raise InvalidInput("url must not contain spaces or control characters", field="url")
    reason = literal_host_refusal(hostname, allow_private_networks=allow_private_networks)
    if reason is not None:
        hint = (
            ""
            if reason in (CLOUD_METADATA, UNPARSEABLE)
            else f"; a self-hosted {refused_by.removesuffix('s')} on a private network needs "
            "webhooks.allow_private_networks = true"
        )
        raise InvalidInput(
            f"url points at a {reason} address, which {refused_by} never reach{hint}",
            field="url",
        )
    return url


def _embedded_ipv4(ip: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 form delivers to: mapped, compatible, translated, 6to4, NAT64."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    # ::/96 holds the deprecated IPv4-compatible form, except :: and ::1 themselves.
    if ip in _NAT64 or ip in _IPV4_TRANSLATED or 1 < int(ip) < 2**32:
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_literal(host: str) -> IPAddress | None:
    """The IP a URL host denotes without DNS, read as a C resolver would; None for a name.

    Raises AddressBlocked for a host that looks numeric but is not a valid address: resolving
    it would hand the interpretation to the system resolver, which is what bypasses rely on.
    """
    candidate = host.strip("[]")
    if ":" in candidate:  # only IPv6 literals contain a colon
        try:
            return IPv6Address(candidate.replace("%25", "%", 1))
        except ValueError:
            raise AddressBlocked(UNPARSEABLE) from None
    name = candidate.removesuffix(".")
    labels = name.split(".")
    if not _NUMERIC_LABEL.match(labels[-1]):
        return None
    # Octal (0177.0.0.1), hex (0x7f.1), integer (2130706433) and short (127.1) forms all
    # reach the dialer unchanged from httpx; inet_aton reads them as the kernel's resolver
    # would. The regex keeps inet_aton from accepting trailing junk after a space.
    if not all(_NUMERIC_LABEL.match(label) for label in labels):
        raise AddressBlocked(UNPARSEABLE)
    try:
        return IPv4Address(socket.inet_aton(name))
    except OSError:
        raise AddressBlocked(UNPARSEABLE) from None


async def system_resolver(host: str, port: int) -> list[str]:
    """Resolve through the operating system without blocking the event loop."""
    loop = asyncio.get_running_loop()
    answers = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(sockaddr[0]) for _family, _type, _proto, _name, sockaddr in answers]


class GuardedNetworkBackend(httpcore.AsyncNetworkBackend):
    """An httpcore backend that checks, then dials, the resolved IP; never the name."""

    def __init__(
        self,
        *,
        allow_private_networks: bool = False,
        resolver: Resolver | None = None,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self._allow_private_networks = allow_private_networks
        self._resolver = resolver or system_resolver
        self._inner = inner or httpcore.AnyIOBackend()

    def _refusal(self, ip: IPAddress | str) -> str | None:
        """The reason to refuse this address under this guard's policy, or None."""
        return refusal(ip, allow_private_networks=self._allow_private_networks)

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 -- httpcore's backend interface
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        candidates = await self._checked_addresses(host, port)
        last_error: Exception | None = None
        for ip in candidates:
            try:
                stream = await self._inner.connect_tcp(
                    str(ip),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last_error = exc
                continue
            await self._check_peer(stream)
            return stream
        assert last_error is not None  # _checked_addresses never returns an empty list
        raise last_error

    async def _checked_addresses(self, host: str, port: int) -> list[IPAddress]:
        literal = address_literal(host)
        if literal is not None:
            answers: list[IPAddress] = [literal]
        else:
            try:
                resolved = await self._resolver(host, port)
            except OSError as exc:
                raise httpcore.ConnectError(f"name resolution failed: {exc}") from exc
            if not resolved:
                raise httpcore.ConnectError("name resolution returned no addresses")
            answers = []
            for answer in resolved:
                try:
                    answers.append(ipaddress.ip_address(answer))
                except ValueError:
                    raise AddressBlocked(UNPARSEABLE) from None
        # One forbidden answer refuses the name: a host mixing public and private answers is
        # either misconfigured or probing, and trying the next answer would reach it anyway.
        for ip in answers:
            reason = self._refusal(ip)
            if reason is not None:
                raise AddressBlocked(reason)
        return answers

    async def _check_peer(self, stream: httpcore.AsyncNetworkStream) -> None:
        # Defence in depth: the socket's own peer must be an address we would have allowed.
        peer: Any = stream.get_extra_info("server_addr")
        if not peer:
            return
        reason = self._refusal(str(peer[0]))
        if reason is not None:
            await stream.aclose()
            raise AddressBlocked(reason)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 -- httpcore's backend interface
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise AddressBlocked("unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)
