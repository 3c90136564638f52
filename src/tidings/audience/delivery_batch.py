"""Group commit for the most common event by far, `delivered` (PRV-6: a million-recipient
campaign brings a million of them within the hour). Concurrent requests hand their event to
one writer task, which applies everything queued so far in one transaction with set-based
statements; each request is answered only after that transaction commits, so "2xx only once
durable" still holds. No artificial delay: a batch is whatever arrived while the previous one
was being written.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

EventT = TypeVar("EventT")
ResultT = TypeVar("ResultT")
MAX_BATCH = 500


class GroupCommit(Generic[EventT, ResultT]):
    """`apply(events)` returns, for each event, its result or the exception to raise for it.
    If `apply` itself fails, every event of that batch is retried alone by `apply_one`, so one
    bad event cannot fail the others."""

    def __init__(
        self,
        apply: Callable[[list[EventT]], Awaitable[list[ResultT | Exception]]],
        apply_one: Callable[[EventT], Awaitable[ResultT]],
        *,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self._apply = apply
        self._apply_one = apply_one
        self._max_batch = max_batch
        self._pending: list[tuple[EventT, asyncio.Future[ResultT]]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def submit(self, event: EventT) -> ResultT:
        future: asyncio.Future[ResultT] = asyncio.get_running_loop().create_future()
        self._pending.append((event, future))
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = asyncio.create_task(self._run())
        self._wake.set()
        return await future

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                await self._settle(batch)

    async def _settle(self, batch: list[tuple[EventT, asyncio.Future[ResultT]]]) -> None:
        try:
            results = await self._apply([event for event, _ in batch])
        except Exception:
            results = None
        for index, (event, future) in enumerate(batch):
            if future.done():  # its request went away
                continue
            try:
                result = results[index] if results is not None else await self._apply_one(event)
            except Exception as exc:
                future.set_exception(exc)
                continue
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)
