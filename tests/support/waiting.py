"""Waiting in tests: on a condition, polled often, with a generous deadline — never a fixed
sleep, so a loaded machine makes a test slower, not wrong. One helper for async conditions,
one for plain ones (a server process starting, a file appearing)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

POLL_SECONDS = 0.05
DEADLINE_SECONDS = 30.0


async def wait_for(
    condition: Callable[[], Awaitable[T]],
    *,
    within_seconds: float = DEADLINE_SECONDS,
    message: str = "condition never held",
) -> T:
    """Poll the async `condition` until it returns something truthy, and return that; fail
    with `message` and its last value once `within_seconds` have passed."""
    deadline = asyncio.get_running_loop().time() + within_seconds
    while True:
        found = await condition()
        if found:
            return found
        assert asyncio.get_running_loop().time() < deadline, f"{message}; last: {found!r}"
        await asyncio.sleep(POLL_SECONDS)


def wait_until(
    condition: Callable[[], Any],
    *,
    within_seconds: float = DEADLINE_SECONDS,
    message: str = "condition never held",
) -> Any:
    """`wait_for` for a plain (blocking) `condition`, outside an event loop."""
    deadline = time.monotonic() + within_seconds
    while True:
        found = condition()
        if found:
            return found
        assert time.monotonic() < deadline, f"{message}; last: {found!r}"
        time.sleep(POLL_SECONDS)
