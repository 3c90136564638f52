"""The webhook client against real loopback HTTP servers: SSRF refusals, deadlines, caps,
per-host limits, redirects, proxies, TLS and response classification (DLV-5..7).

Only DNS is faked (an injected resolver); every server is a real socket on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from standardwebhooks import Webhook

from tidings.bootstrap import utcnow
from tidings.delivery.signing import generate_secret, sign_headers
from tidings.delivery.webhook_client import (
    Outcome,
    WebhookClient,
    classify_status,
    parse_retry_after,
)


@dataclass
class Received:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


Handler = Callable[[Received, asyncio.StreamWriter], Awaitable[None]]


async def respond(
    writer: asyncio.StreamWriter,
    status: int,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
) -> None:
    head = [f"HTTP/1.1 {status} Status", f"Content-Length: {len(body)}", "Connection: close"]
    head += [f"{name}: {value}" for name, value in (headers or {}).items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    await writer.drain()


async def ok(request: Received, writer: asyncio.StreamWriter) -> None:
    await respond(writer, 200, b"thanks")


@dataclass
class LoopbackServer:
    """A tiny HTTP/1.1 server on 127.0.0.1: one request per connection, handled by `handler`."""

    handler: Handler = ok
    ssl_context: ssl.SSLContext | None = None
    received: list[Received] = field(default_factory=list)
    connections: int = 0
    active: int = 0
    max_active: int = 0
    port: int = 0
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    async def __aenter__(self) -> LoopbackServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            method, target, _ = head[0].split(" ", 2)
            headers = {
                name.strip().lower(): value.strip()
                for name, value in (line.split(":", 1) for line in head[1:] if line)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            request = Received(method, target, headers, body)
            self.received.append(request)
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            try:
                await self.handler(request, writer)
            finally:
                self.active -= 1
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass  # the client hung up, as several tests make it do
        finally:
            writer.close()
            self._tasks.discard(task)


class FakeDNS:
    """Maps test hostnames to loopback (or any) answers, and counts lookups."""

    def __init__(self, answers: Mapping[str, Sequence[list[str]]]) -> None:
        self._answers = answers
        self.lookups: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        served = self._answers[host]
        return served[min(self.lookups.count(host), len(served)) - 1]


@pytest.fixture
async def make_client() -> AsyncIterator[Callable[..., WebhookClient]]:
    clients: list[WebhookClient] = []

    def factory(**options: Any) -> WebhookClient:
        client = WebhookClient(**{"clock": utcnow, **options})
        clients.append(client)
        return client

    yield factory
    for client in clients:
        await client.aclose()


@pytest.fixture
async def server() -> AsyncIterator[LoopbackServer]:
    async with LoopbackServer() as running:
        yield running


HEADERS = {"webhook-id": "msg_1"}


# --- SSRF: the guard on the whole request path -----------------------------------------------

LOOPBACK_FORMS = [
    "http://2130706433:{port}/",  # integer
    "http://0177.0.0.1:{port}/",  # octal
    "http://0x7f.0.0.1:{port}/",  # hex per octet
    "http://0x7f000001:{port}/",  # hex integer
    "http://127.1:{port}/",  # short form
    "http://127.0.0.1:{port}/",
    "http://127。0。0。1:{port}/",  # ideographic full stops, normalised by IDNA
    "http://0.0.0.0:{port}/",  # Linux routes connects to 0.0.0.0 to the local host
    "http://0:{port}/",
    "http://[::]:{port}/",
    "http://[::1]:{port}/",
    "http://[::ffff:127.0.0.1]:{port}/",  # IPv4-mapped
    "http://[::ffff:7f00:1]:{port}/",
    "http://[::127.0.0.1]:{port}/",  # IPv4-compatible
    "http://[64:ff9b::7f00:1]:{port}/",  # NAT64
    "http://[2002:7f00:1::]:{port}/",  # 6to4
    "http://user@127.0.0.1:{port}/",  # userinfo in front of the real host
    "http://127.0.0.1:{port}#@example.com/",
]

OTHER_FORBIDDEN = [
    "http://169.254.169.254/latest/meta-data",
    "http://[fd00:ec2::254]/",
    "http://100.100.100.200/",
    "http://100.64.0.1/",
    "http://10.0.0.1/",
    "http://192.168.1.1/",
    "http://172.16.0.1/",
    "http://[fe80::1]/",
    "http://[fe80::1%25eth0]/",
    "http://224.0.0.1/",
    "http://255.255.255.255/",
    "http://192.0.2.1/",
    "http://[2001:db8::1]/",
    "http://1.2.3.4.5/",  # numeric-looking but not an address: refused, not resolved
    "http://0x1ffffffff/",
]


@pytest.mark.parametrize("url", LOOPBACK_FORMS)
async def test_loopback_in_any_spelling_is_blocked(
    url: str, server: LoopbackServer, make_client: Callable[..., WebhookClient]
) -> None:
    """Each spelling reaches a live server on this port if the guard misses it."""
    dns = FakeDNS({})
    client = make_client(resolver=dns, deadline_seconds=2.0)
    result = await client.post(url.format(port=server.port), b"{}", HEADERS)
    assert result.outcome is Outcome.BLOCKED
    assert result.status_code is None
    assert server.connections == 0
    assert dns.lookups == [], "numeric hosts must be judged, never resolved"


@pytest.mark.parametrize("url", OTHER_FORBIDDEN)
async def test_private_metadata_and_reserved_addresses_are_blocked(
    url: str, make_client: Callable[..., WebhookClient]
) -> None:
    """Cloud metadata and internal services are the usual SSRF targets."""
    dns = FakeDNS({})
    result = await make_client(resolver=dns, deadline_seconds=2.0).post(url, b"{}", HEADERS)
    assert result.outcome is Outcome.BLOCKED
    assert result.error is not None
    assert result.error.startswith("blocked")
    assert dns.lookups == []


async def test_metadata_reason_is_reported(make_client: Callable[..., WebhookClient]) -> None:
    """The admin reading the delivery log needs to know why their URL never gets a request."""
    result = await make_client().post("http://169.254.169.254/latest/meta-data", b"{}", HEADERS)
    assert result.error == "blocked: cloud metadata"


@pytest.mark.parametrize(
    ("answers", "reason"),
    [
        (["10.20.30.40"], "private"),
        (["127.0.0.1"], "loopback"),
        (["::ffff:169.254.169.254"], "cloud metadata"),
        (["93.184.215.14", "192.168.0.10"], "private"),
    ],
)
async def test_a_name_resolving_to_a_forbidden_address_is_blocked(
    answers: list[str],
    reason: str,
    server: LoopbackServer,
    make_client: Callable[..., WebhookClient],
) -> None:
    """Names are the common case: the check must apply to what they resolve to."""
    client = make_client(resolver=FakeDNS({"hooks.example": [answers]}))
    result = await client.post(f"http://hooks.example:{server.port}/", b"{}", HEADERS)
    assert result.outcome is Outcome.BLOCKED
    assert result.error == f"blocked: {reason}"
    assert server.connections == 0


async def test_name_is_resolved_once_per_connection_and_the_answer_is_dialed(
    server: LoopbackServer, make_client: Callable[..., WebhookClient]
) -> None:
    """Rebinding: if anything re-resolved after the check, the second answer (an address with
    nothing listening) would be dialed and the request would fail."""
    dns = FakeDNS({"rebind.test": [["127.0.0.1"], ["10.255.255.1"]]})
    client = make_client(allow_private_networks=True, resolver=dns, deadline_seconds=3.0)
    result = await client.post(f"http://rebind.test:{server.port}/hook", b"{}", HEADERS)
    assert result.outcome is Outcome.DELIVERED
    assert dns.lookups == ["rebind.test"]
    assert server.received[0].headers["host"] == f"rebind.test:{server.port}"


async def test_allow_private_networks_reaches_loopback_but_not_metadata(
    server: LoopbackServer, make_client: Callable[..., WebhookClient]
) -> None:
    """Self-hosted setups point webhooks at their LAN; the metadata service stays out of reach."""
    client = make_client(allow_private_networks=True)
    delivered = await client.post(f"http://127.0.0.1:{server.port}/", b"{}", HEADERS)
    assert delivered.outcome is Outcome.DELIVERED
    blocked = await client.post("http://169.254.169.254/", b"{}", HEADERS)
    assert blocked.outcome is Outcome.BLOCKED


async def test_redirects_are_not_followed(make_client: Callable[..., WebhookClient]) -> None:
    """A redirect is a second, unchecked request to wherever the receiver chooses."""

    async def redirect(request: Received, writer: asyncio.StreamWriter) -> None:
        if request.target == "/hook":
            await respond(writer, 302, headers={"Location": "/internal-admin"})
        else:
            await respond(writer, 200)

    async with LoopbackServer(redirect) as target:
        client = make_client(allow_private_networks=True)
        result = await client.post(f"http://127.0.0.1:{target.port}/hook", b"{}", HEADERS)
    assert result.outcome is Outcome.REJECTED
    assert result.status_code == 302
    assert [request.target for request in target.received] == ["/hook"]


async def test_proxy_environment_variables_are_ignored(
    server: LoopbackServer,
    make_client: Callable[..., WebhookClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through a proxy the dialed address is the proxy's, and the guard checks nothing useful."""
    async with LoopbackServer() as proxy:
        proxy_url = f"http://127.0.0.1:{proxy.port}"
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
            monkeypatch.setenv(name, proxy_url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        client = make_client(allow_private_networks=True)
        result = await client.post(f"http://127.0.0.1:{server.port}/hook", b"{}", HEADERS)
    assert result.outcome is Outcome.DELIVERED
    assert proxy.connections == 0
    assert [request.target for request in server.received] == ["/hook"]


async def test_non_http_urls_are_refused(make_client: Callable[..., WebhookClient]) -> None:
    """file://, gopher:// and friends have no business in a webhook."""
    client = make_client()
    for url in ("file:///etc/passwd", "gopher://127.0.0.1/", "http://"):
        result = await client.post(url, b"{}", HEADERS)
        assert result.outcome is Outcome.BLOCKED


# --- Deadline, body cap and per-host limits ---------------------------------------------------


async def test_trickling_server_is_cut_off_at_the_whole_request_deadline(
    make_client: Callable[..., WebhookClient],
) -> None:
    """Per-read timeouts never fire on a byte every 0.2 s; only a whole-request deadline keeps a
    hostile endpoint from holding a worker past its lease."""

    async def trickle(request: Received, writer: asyncio.StreamWriter) -> None:
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.2)

    async with LoopbackServer(trickle) as slow:
        client = make_client(allow_private_networks=True, deadline_seconds=1.0)
        started = time.monotonic()
        # The outer bound only keeps a broken client from hanging the suite.
        result = await asyncio.wait_for(
            client.post(f"http://127.0.0.1:{slow.port}/", b"{}", HEADERS), timeout=5
        )
        took = time.monotonic() - started
    assert result.outcome is Outcome.RETRY
    assert result.error == "timeout"
    assert 0.9 <= took < 1.6
    assert 900 <= result.elapsed_ms < 1600


async def test_response_body_is_read_only_up_to_the_cap(
    make_client: Callable[..., WebhookClient],
) -> None:
    """An endless body must not fill memory or hold the request until the deadline."""

    async def endless(request: Received, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"y" * 4096
        while True:
            writer.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
            await writer.drain()

    async with LoopbackServer(endless) as firehose:
        client = make_client(
            allow_private_networks=True, max_response_bytes=10_000, deadline_seconds=5.0
        )
        result = await client.post(f"http://127.0.0.1:{firehose.port}/", b"{}", HEADERS)
    assert result.outcome is Outcome.DELIVERED
    assert result.body == "y" * 10_000
    assert result.elapsed_ms < 2000


async def test_a_slow_host_cannot_starve_another(make_client: Callable[..., WebhookClient]) -> None:
    """DLV-7: requests to one stuck endpoint queue behind its own limit, not everyone's."""
    release, four_stuck = asyncio.Event(), asyncio.Event()
    arrived = 0

    async def stuck(request: Received, writer: asyncio.StreamWriter) -> None:
        nonlocal arrived
        arrived += 1
        if arrived == 4:
            four_stuck.set()
        await asyncio.wait_for(release.wait(), timeout=3.0)
        await respond(writer, 200)

    async with LoopbackServer(stuck) as slow, LoopbackServer() as fast:
        dns = FakeDNS({"slow.test": [["127.0.0.1"]], "fast.test": [["127.0.0.1"]]})
        client = make_client(allow_private_networks=True, resolver=dns)
        slow_url = f"http://slow.test:{slow.port}/"
        in_flight = [asyncio.create_task(client.post(slow_url, b"{}", HEADERS)) for _ in range(12)]
        await asyncio.wait_for(four_stuck.wait(), timeout=5)
        await asyncio.sleep(0.2)  # give any request beyond the bound time to arrive
        assert slow.max_active == 4

        started = time.monotonic()
        quick = await asyncio.wait_for(
            client.post(f"http://fast.test:{fast.port}/", b"{}", HEADERS), timeout=2.0
        )
        assert quick.outcome is Outcome.DELIVERED
        assert time.monotonic() - started < 0.5

        release.set()
        results = await asyncio.gather(*in_flight)
    # Requests beyond the host's bound are not queued behind it: they come back BUSY at once,
    # so the caller (the webhook job) can defer them without holding a worker slot.
    outcomes = [result.outcome for result in results]
    assert outcomes.count(Outcome.DELIVERED) == 4
    assert outcomes.count(Outcome.BUSY) == 8
    assert slow.max_active == 4


# --- Classification ---------------------------------------------------------------------------


async def status_from_path(request: Received, writer: asyncio.StreamWriter) -> None:
    # /429?Retry-After=120 answers 429 with that header.
    path, _, query = request.target.partition("?")
    headers = dict(pair.split("=", 1) for pair in unquote(query).split("&") if pair)
    await respond(writer, int(path.strip("/")), b"receiver says hello", headers)


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, Outcome.DELIVERED),
        (204, Outcome.DELIVERED),
        (410, Outcome.GONE),
        (408, Outcome.RETRY),
        (429, Outcome.RETRY),
        (500, Outcome.RETRY),
        (503, Outcome.RETRY),
        (400, Outcome.REJECTED),
        (401, Outcome.REJECTED),
        (404, Outcome.REJECTED),
        (301, Outcome.REJECTED),
    ],
)
async def test_responses_are_classified_by_status(
    status: int, outcome: Outcome, make_client: Callable[..., WebhookClient]
) -> None:
    """The caller disables, retries or records purely on this outcome."""
    async with LoopbackServer(status_from_path) as receiver:
        client = make_client(allow_private_networks=True)
        result = await client.post(f"http://127.0.0.1:{receiver.port}/{status}", b"{}", HEADERS)
    assert result.outcome is outcome
    assert result.status_code == status
    assert result.error is None
    expected_body = "" if status == 204 else "receiver says hello"
    assert result.body == expected_body
    assert classify_status(status) is outcome


async def test_retry_after_is_read_from_seconds_and_dates_and_capped(
    make_client: Callable[..., WebhookClient],
) -> None:
    """A receiver asking us to back off must be obeyed, but never for longer than the cap."""
    in_two_minutes = format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    async with LoopbackServer(status_from_path) as receiver:
        client = make_client(allow_private_networks=True, max_retry_after_seconds=600)
        base = f"http://127.0.0.1:{receiver.port}"
        seconds = await client.post(f"{base}/429?Retry-After=120", b"{}", HEADERS)
        date = await client.post(f"{base}/503?Retry-After={in_two_minutes}", b"{}", HEADERS)
        huge = await client.post(f"{base}/429?Retry-After=999999", b"{}", HEADERS)
        rejected = await client.post(f"{base}/400?Retry-After=120", b"{}", HEADERS)
    assert seconds.retry_after_seconds == 120
    assert date.retry_after_seconds is not None
    assert 115 <= date.retry_after_seconds <= 121
    assert huge.retry_after_seconds == 600
    assert rejected.retry_after_seconds is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("0", 0.0),
        ("30", 30.0),
        ("  45 ", 45.0),
        ("86400", 3600.0),
        ("-5", None),
        ("soon", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # in the past
        ("Sun, 01 Jan 2034 00:01:40 GMT", 100.0),
        ("Sun, 01 Jan 2034 00:01:40 -0000", 100.0),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    """Both RFC 9110 forms appear in the wild; garbage must not become a wait."""
    now = datetime(2034, 1, 1, tzinfo=UTC)
    assert parse_retry_after(value, now=now, cap_seconds=3600) == expected


async def test_refused_connection_is_retried(make_client: Callable[..., WebhookClient]) -> None:
    """An endpoint that is down today may be up tomorrow."""
    async with LoopbackServer() as closed:
        port = closed.port
    result = await make_client(allow_private_networks=True).post(
        f"http://127.0.0.1:{port}/", b"{}", HEADERS
    )
    assert result.outcome is Outcome.RETRY
    assert result.error == "connect error"


async def test_signed_request_reaches_the_receiver_verifiable(
    server: LoopbackServer, make_client: Callable[..., WebhookClient]
) -> None:
    """End to end: body and headers arrive byte for byte, and a receiver's library verifies them."""
    secret = generate_secret()
    body = b'{"type":"campaign.sent","data":{"campaign_id":"c1"}}'
    signed = sign_headers("msg_e2e", datetime.now(UTC), body, [secret])
    client = make_client(allow_private_networks=True, user_agent="tidings-test/1")
    caller_headers = {**signed, "Content-Type": "application/webhook+json", "Host": "elsewhere"}
    result = await client.post(f"http://127.0.0.1:{server.port}/hooks/in", body, caller_headers)
    assert result.outcome is Outcome.DELIVERED
    received = server.received[0]
    assert received.method == "POST"
    assert received.body == body
    # The caller may choose the content type, never the Host: it names the URL's host.
    assert received.headers["content-type"] == "application/webhook+json"
    assert received.headers["host"] == f"127.0.0.1:{server.port}"
    assert received.headers["user-agent"] == "tidings-test/1"
    assert received.headers["accept-encoding"] == "identity"
    Webhook(secret).verify(received.body, received.headers)


# --- TLS ---------------------------------------------------------------------------------------


def self_signed_certificate(directory: Path, hostname: str) -> tuple[Path, Path]:
    cert, key = directory / f"{hostname}.pem", directory / f"{hostname}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
         "-subj", f"/CN={hostname}", "-addext", f"subjectAltName=DNS:{hostname}"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_tls_verifies_the_url_hostname_while_dialing_the_checked_ip(
    tmp_path: Path, make_client: Callable[..., WebhookClient]
) -> None:
    """Dialing an IP must not weaken TLS: SNI and verification use the name in the URL."""
    cert, key = self_signed_certificate(tmp_path, "hooks.test")
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    server_names: list[str | None] = []

    def record_server_name(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        server_names.append(name)

    server_tls.sni_callback = record_server_name
    trusting = ssl.create_default_context(cafile=str(cert))
    dns = FakeDNS({"hooks.test": [["127.0.0.1"]], "other.test": [["127.0.0.1"]]})

    async with LoopbackServer(ok, ssl_context=server_tls) as receiver:
        client = make_client(allow_private_networks=True, resolver=dns, ssl_context=trusting)
        good = await client.post(f"https://hooks.test:{receiver.port}/", b"{}", HEADERS)
        wrong_name = await client.post(f"https://other.test:{receiver.port}/", b"{}", HEADERS)
        untrusted = await make_client(allow_private_networks=True, resolver=dns).post(
            f"https://hooks.test:{receiver.port}/", b"{}", HEADERS
        )
    assert good.outcome is Outcome.DELIVERED
    assert server_names[0] == "hooks.test"
    assert wrong_name.outcome is Outcome.RETRY
    assert wrong_name.error == "tls error"
    assert untrusted.outcome is Outcome.RETRY
    assert untrusted.error == "tls error"
