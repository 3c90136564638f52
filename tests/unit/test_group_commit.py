"""Group commit for provider deliveries (`audience/hearing/group_commit.py`, PRV-6): concurrent
events share a write, each is answered for itself, a failed write falls back to one event at
a time, and a second batch is written while the first still waits on the database."""

from __future__ import annotations

import asyncio

from tidings.audience.hearing.group_commit import GroupCommit


async def test_concurrent_events_share_writes_and_each_gets_its_own_answer() -> None:
    """Many requests at once make a few writes, not one each, and nobody gets another's
    result."""
    writes: list[list[int]] = []

    async def apply(events: list[int]) -> list[int | Exception]:
        writes.append(events)
        await asyncio.sleep(0.01)  # the database round trip
        return [event * 10 for event in events]

    async def apply_one(event: int) -> int:
        raise AssertionError("no write failed, so nothing is retried alone")

    group: GroupCommit[int, int] = GroupCommit(apply, apply_one)
    try:
        results = await asyncio.gather(*(group.submit(n) for n in range(100)))
    finally:
        await group.close()
    assert results == [n * 10 for n in range(100)]
    assert sorted(event for write in writes for event in write) == list(range(100))
    assert len(writes) < 10


async def test_a_failed_write_is_retried_event_by_event_so_one_bad_event_fails_alone() -> None:
    """A batch whose write fails as a whole (a bad row) is taken apart: the others succeed,
    the bad one gets its own error, and a per-event exception reaches only its request."""

    async def apply(events: list[int]) -> list[int | Exception]:
        if 13 in events:
            raise RuntimeError("the batch's statement failed")
        return [ValueError("replayed") if event == 7 else event for event in events]

    async def apply_one(event: int) -> int:
        if event == 13:
            raise RuntimeError("bad event")
        return event

    group: GroupCommit[int, int] = GroupCommit(apply, apply_one)
    try:
        outcomes = await asyncio.gather(
            *(group.submit(n) for n in (1, 13, 2)), return_exceptions=True
        )
        replayed = await asyncio.gather(group.submit(7), return_exceptions=True)
    finally:
        await group.close()
    assert (outcomes[0], outcomes[2]) == (1, 2)
    assert isinstance(outcomes[1], RuntimeError)
    assert isinstance(replayed[0], ValueError)


async def test_a_second_batch_is_written_while_the_first_waits_on_the_database() -> None:
    """Two writers: a slow write does not hold up the events that arrive behind it."""
    first_started = asyncio.Event()
    release_first = asyncio.Event()

    async def apply(events: list[str]) -> list[str | Exception]:
        if "slow" in events:
            first_started.set()
            await release_first.wait()
        return list[str | Exception](events)

    async def apply_one(event: str) -> str:
        return event

    group: GroupCommit[str, str] = GroupCommit(apply, apply_one, writers=2)
    try:
        slow = asyncio.ensure_future(group.submit("slow"))
        await asyncio.wait_for(first_started.wait(), 5)
        assert await asyncio.wait_for(group.submit("quick"), 5) == "quick"
        assert not slow.done()
        release_first.set()
        assert await asyncio.wait_for(slow, 5) == "slow"
    finally:
        await group.close()
