"""A real worker process for crash tests: runs `sleepy` jobs, each recording its start in a file
and then sleeping, so a test can SIGKILL the process while the job is in flight."""

import asyncio
import sys
from pathlib import Path

from tidings.bootstrap import queue_policy, utcnow
from tidings.config import QueueSettings
from tidings.queue.job import Job
from tidings.queue.policy import HandlerRegistry
from tidings.queue.service import JobQueue
from tidings.storage.database import create_database


async def main(database_url: str, marker: Path, lease_seconds: float) -> None:
    db = create_database(database_url)
    policy = queue_policy(QueueSettings(lease_seconds=lease_seconds, poll_interval_seconds=0.05))

    async def sleepy(job: Job) -> None:
        with marker.open("a") as out:
            out.write(f"started {job.id} attempt {job.attempts}\n")
        await asyncio.sleep(3600)

    registry = HandlerRegistry()
    registry.register("sleepy", sleepy, renew_lease=False, timeout_seconds=3600)
    queue = JobQueue(db, policy, utcnow)
    await queue.run_workers(registry, asyncio.Event())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])))
