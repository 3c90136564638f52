"""The SSRF guard: which addresses are forbidden, how hosts are read, and what gets dialed (DLV-6).

DNS and the socket layer are faked here (the world outside the machine); the guard is real.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import httpcore
import pytest

from tidings.delivery.ssrf import (
    AddressBlocked,
    GuardedNetworkBackend,
    address_literal,
    is_forbidden_address,
    system_resolver,
)


class FakeDNS:
    """Answers lookups from a table; each name's answers are served in turn, the last repeats."""

    def __init__(self, answers: Mapping[str, Sequence[list[str]]]) -> None:
        self._answers = answers
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        served = self._answers[host]
        return served[min(self.lookups.count(host), len(served)) - 1]


class FakeStream(httpcore.AsyncNetworkStream):
    def __init__(self, peer: tuple[str, int]) -> None:
        self.peer = peer
        self.closed = False

    def get_extra_info(self, info: str) -> Any:
        return self.peer if info == "server_addr" else None

    async def aclose(self) -> None:
        self.closed = True


class FakeNetwork(httpcore.AsyncNetworkBackend):
    """Records every dial; `unreachable` addresses refuse, `peer_override` lies about the peer."""

    def __init__(
        self, *, unreachable: Iterable[str] = (), peer_override: str | None = None
    ) -> None:
        self.dialed: list[str] = []
        self.streams: list[FakeStream] = []
        self._unreachable = set(unreachable)
        self._peer_override = peer_override

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 -- httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.dialed.append(host)
        if host in self._unreachable:
            raise httpcore.ConnectError("connection refused")
        stream = FakeStream((self._peer_override or host, port))
        self.streams.append(stream)
        return stream


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.0.1", "link-local"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("100.100.100.200", "cloud metadata"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("100.127.255.254", "carrier-grade NAT"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("0.1.2.3", "reserved"),
        ("192.0.0.8", "reserved"),
        ("192.0.2.10", "reserved"),
        ("198.18.0.1", "reserved"),
        ("198.51.100.7", "reserved"),
        ("203.0.113.9", "reserved"),
        ("2001:db8::1", "reserved"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "reserved"),  # Teredo
        ("64:ff9b:1::a00:1", "reserved"),  # local-use NAT64
        ("255.255.255.255", "broadcast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        # IPv6 forms that deliver to an embedded IPv4 address are judged by that address.
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:7f00:1", "loopback"),
        ("::ffff:169.254.169.254", "cloud metadata"),
        ("::127.0.0.1", "loopback"),  # IPv4-compatible
        ("::ffff:0:10.0.0.1", "private"),  # IPv4-translated (SIIT)
        ("2002:7f00:1::", "loopback"),  # 6to4
        ("2002:a9fe:a9fe::1", "cloud metadata"),
        ("64:ff9b::7f00:1", "loopback"),  # NAT64
        ("64:ff9b::a00:1", "private"),
        ("not an address", "unparseable address"),
    ],
)
def test_forbidden_addresses_are_named_by_their_range(address: str, reason: str) -> None:
    """The reason lands in the delivery log; a wrong range name misleads the admin reading it."""
    assert is_forbidden_address(address) == reason


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "93.184.215.14",
        "2606:4700:4700::1111",
        "::ffff:8.8.8.8",
        "2002:808:808::",
        "64:ff9b::808:808",
    ],
)
def test_public_addresses_are_allowed(address: str) -> None:
    """A guard that refuses the public internet would break every real webhook."""
    assert is_forbidden_address(address) is None
    assert is_forbidden_address(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0X7F.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("::1", "::1"),
        ("[::ffff:7f00:1]", "::ffff:7f00:1"),
        ("fe80::1%25eth0", "fe80::1%eth0"),
    ],
)
def test_numeric_hosts_are_read_as_the_system_resolver_would(host: str, expected: str) -> None:
    """httpx hands hosts like "0x7f.1" to the dialer unchanged; reading them differently from the C
    resolver is exactly the gap that octal/hex/integer bypasses exploit."""
    assert address_literal(host) == ipaddress.ip_address(expected)


@pytest.mark.parametrize("host", ["example.com", "hooks.example.org.", "localhost", "1.example"])
def test_names_are_left_for_resolution(host: str) -> None:
    """Only numeric hosts are parsed locally; real names must still go through DNS and checks."""
    assert address_literal(host) is None


@pytest.mark.parametrize("host", ["1.2.3.4.5", "0x1ffffffff", "256.256.256.256", "a.0x7f", "::zz"])
def test_numeric_looking_hosts_that_do_not_parse_are_refused(host: str) -> None:
    """Passing them on would let the system resolver decide what they mean."""
    with pytest.raises(AddressBlocked) as blocked:
        address_literal(host)
    assert blocked.value.reason == "unparseable address"


async def test_rebinding_dials_the_checked_address_and_refuses_the_second_answer() -> None:
    """DNS rebinding: a name answers public for the check, private for the connect. The guard
    resolves once per connection and dials the IP it checked, so the trick has nothing to swap."""
    dns = FakeDNS({"rebind.test": [["93.184.215.14"], ["127.0.0.1"]]})
    network = FakeNetwork()
    guard = GuardedNetworkBackend(resolver=dns, inner=network)

    await guard.connect_tcp("rebind.test", 443)
    assert network.dialed == ["93.184.215.14"]
    assert dns.lookups == ["rebind.test"]

    with pytest.raises(AddressBlocked) as blocked:
        await guard.connect_tcp("rebind.test", 443)
    assert blocked.value.reason == "loopback"
    assert network.dialed == ["93.184.215.14"], "the rebound answer must never be dialed"
    assert dns.lookups == ["rebind.test", "rebind.test"]


async def test_one_forbidden_answer_refuses_the_whole_name() -> None:
    """Otherwise an attacker lists a public decoy first and the private target second."""
    dns = FakeDNS({"mixed.test": [["93.184.215.14", "10.0.0.5"]]})
    network = FakeNetwork()
    guard = GuardedNetworkBackend(resolver=dns, inner=network)
    with pytest.raises(AddressBlocked) as blocked:
        await guard.connect_tcp("mixed.test", 80)
    assert blocked.value.reason == "private"
    assert network.dialed == []


async def test_numeric_hosts_are_dialed_in_normal_form_without_a_lookup() -> None:
    """The dialer must receive the address the guard judged, not the odd spelling."""
    dns = FakeDNS({})
    network = FakeNetwork()
    guard = GuardedNetworkBackend(allow_private_networks=True, resolver=dns, inner=network)
    await guard.connect_tcp("0x7f.1", 80)
    assert network.dialed == ["127.0.0.1"]
    assert dns.lookups == []


async def test_a_forbidden_peer_is_refused_even_after_connecting() -> None:
    """Defence in depth: whatever the socket actually reached is checked again and closed."""
    network = FakeNetwork(peer_override="10.0.0.5")
    guard = GuardedNetworkBackend(resolver=FakeDNS({"a.test": [["93.184.215.14"]]}), inner=network)
    with pytest.raises(AddressBlocked) as blocked:
        await guard.connect_tcp("a.test", 80)
    assert blocked.value.reason == "private"
    assert network.streams[0].closed


async def test_allowing_private_networks_still_refuses_cloud_metadata() -> None:
    """Self-hosted setups need their LAN; none needs the cloud's credential endpoint."""
    network = FakeNetwork()
    guard = GuardedNetworkBackend(allow_private_networks=True, resolver=FakeDNS({}), inner=network)
    await guard.connect_tcp("10.0.0.1", 80)
    await guard.connect_tcp("127.0.0.1", 80)
    with pytest.raises(AddressBlocked) as blocked:
        await guard.connect_tcp("169.254.169.254", 80)
    assert blocked.value.reason == "cloud metadata"
    assert network.dialed == ["10.0.0.1", "127.0.0.1"]


async def test_an_unreachable_answer_falls_through_to_the_next_checked_one() -> None:
    """Hosts with several addresses stay reachable when one of them is down."""
    dns = FakeDNS({"two.test": [["93.184.215.14", "93.184.215.15"]]})
    network = FakeNetwork(unreachable={"93.184.215.14"})
    guard = GuardedNetworkBackend(resolver=dns, inner=network)
    await guard.connect_tcp("two.test", 80)
    assert network.dialed == ["93.184.215.14", "93.184.215.15"]


async def test_resolution_failure_is_a_connect_error() -> None:
    """A name that does not resolve is retried like any connection failure, not crashed on."""

    async def broken(host: str, port: int) -> list[str]:
        raise OSError("no such host")

    guard = GuardedNetworkBackend(resolver=broken, inner=FakeNetwork())
    with pytest.raises(httpcore.ConnectError):
        await guard.connect_tcp("missing.test", 80)


async def test_unix_sockets_are_refused() -> None:
    """A local socket is as private as it gets."""
    guard = GuardedNetworkBackend(allow_private_networks=True, inner=FakeNetwork())
    with pytest.raises(AddressBlocked):
        await guard.connect_unix_socket("/var/run/docker.sock")


async def test_system_resolver_returns_addresses() -> None:
    """The default resolver must hand back plain IP strings the guard can parse."""
    answers = await system_resolver("localhost", 80)
    assert answers
    assert {is_forbidden_address(answer) for answer in answers} == {"loopback"}
