"""A lean HTTP/1.1 load client for the API benchmarks: keep-alive connections each sending
prepared requests one after another (each goes once the previous answer is in), counting the
answers by a key and timing each one.

A bare protocol rather than httpx or asyncio streams: profiled, httpx's pool spent more CPU
choosing a connection per request than the API spent on it, and streams cost a future and
several loop turns per answer; on a shared machine the client's CPU is taken from the server
it measures.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# What an answer is counted as: from its status line's code and its body.
Classify = Callable[[str, bytes], str]


def by_status(status: str, _body: bytes) -> str:
    return status


@dataclass
class Answers:
    """What the connections heard: answers counted by key, and each answer's latency (s)."""

    counts: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)

    def add(self, key: str, latency: float) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1
        self.latencies.append(latency)


class _Connection(asyncio.Protocol):
    def __init__(self, requests: list[bytes], answers: Answers, classify: Classify) -> None:
        self._requests = requests  # shared by every connection; each pops the next
        self._answers = answers
        self._classify = classify
        self._buffer = b""
        self._sent_at = 0.0
        self._transport: asyncio.Transport | None = None
        self.finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._send_next()

    def _send_next(self) -> None:
        assert self._transport is not None
        if not self._requests:
            if not self.finished.done():
                self.finished.set_result(None)
            return
        self._sent_at = time.perf_counter()
        self._transport.write(self._requests.pop())

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while (end := self._buffer.find(b"\r\n\r\n")) >= 0:
            head = self._buffer[:end].decode("latin-1").split("\r\n")
            length = next(
                (int(line.split(":", 1)[1]) for line in head[1:]
                 if line.lower().startswith("content-length:")),
                0,
            )  # fmt: skip
            if len(self._buffer) < end + 4 + length:
                return  # the rest of this answer is still on its way
            body = self._buffer[end + 4 : end + 4 + length]
            self._buffer = self._buffer[end + 4 + length :]
            status = head[0].split(" ", 2)[1]
            self._answers.add(self._classify(status, body), time.perf_counter() - self._sent_at)
            self._send_next()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.finished.done():
            self.finished.set_exception(exc or ConnectionError("the API closed the connection"))


async def send_all(
    port: int,
    requests: list[bytes],
    connections: int,
    classify: Classify = by_status,
) -> tuple[float, Answers]:
    """Send every request over `connections` keep-alive connections to 127.0.0.1:`port`, in
    the order given; the seconds taken and the answers."""
    loop = asyncio.get_running_loop()
    queue = list(reversed(requests))
    answers = Answers()
    opened: list[tuple[asyncio.Transport, _Connection]] = []
    try:
        started = time.perf_counter()
        for _ in range(min(connections, len(requests))):
            transport, connection = await loop.create_connection(
                lambda: _Connection(queue, answers, classify), "127.0.0.1", port
            )
            opened.append((transport, connection))
        await asyncio.gather(*(connection.finished for _, connection in opened))
        return time.perf_counter() - started, answers
    finally:
        for transport, _ in opened:
            transport.close()


def percentile(values: list[float], share: float) -> float:
    """The value below which `share` of `values` lie (nearest rank); 0.0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(share * len(ordered) + 0.5) - 1))
    return ordered[rank]
