"""What became of a test send (SND-26): a test message is a queued job, so "Test sent" is only
true once a worker handed it over. Wait a few seconds for the jobs' outcomes and say what
happened — sent, failing (with the job's recorded error: the relay and the error's class), or
still waiting for a worker — instead of claiming success for a message that is only queued."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from tidings.domain.jobs import JobStatus
from tidings.queue.service import JobQueue

POLL_SECONDS = 0.2


@dataclass(frozen=True, slots=True)
class CopyOutcome:
    sent: int
    failing: tuple[str, ...]  # each failing job's last error (codes and class names only)
    waiting: int  # neither sent nor failed yet: no worker took it in the time given

    @property
    def ok(self) -> bool:
        return not self.failing and not self.waiting

    def message(self) -> str:
        if self.ok:
            return f"Test sent to {self.sent} address(es)."
        parts = []
        if self.sent:
            parts.append(f"sent to {self.sent} address(es)")
        if self.failing:
            reasons = "; ".join(sorted(set(self.failing)))
            parts.append(
                f"not sent to {len(self.failing)} ({reasons}); it is tried again — see Jobs"
            )
        if self.waiting:
            parts.append(
                f"{self.waiting} still queued: no worker has sent it yet (is one running?)"
            )
        text = "; ".join(parts)
        return f"Test {text}."


async def await_outcome(
    queue: JobQueue, job_ids: Sequence[int], *, within_seconds: float
) -> CopyOutcome:
    """Poll the test messages' jobs until each is sent or failed once, or the time is up."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_seconds
    while True:
        sent, failing, waiting = 0, [], 0
        for job_id in job_ids:
            job, _attempts = await queue.get(job_id)
            if job.status == JobStatus.DONE:
                sent += 1
            elif job.status == JobStatus.DEAD or (job.attempts and job.last_error):
                failing.append(job.last_error or "gave up")
            else:
                waiting += 1
        if not waiting or loop.time() >= deadline:
            return CopyOutcome(sent, tuple(failing), waiting)
        await asyncio.sleep(POLL_SECONDS)
