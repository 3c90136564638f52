"""Admin view of the job queue: list (e.g. dead jobs), inspect with attempts, replay."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, Field

from tidings.api.admin.outbox import MessageOutcomePublic
from tidings.api.deps import ContainerDep
from tidings.api.pagination import Cursor, Limit, Page, int_cursor, page_of
from tidings.domain.jobs import JobStatus
from tidings.queue.job import Job

router = APIRouter(prefix="/jobs", tags=["admin: jobs"])
JobId = Annotated[int, Path(ge=1, le=2**62)]


class JobPublic(BaseModel):
    """A job without its payload (payloads can hold addresses)."""

    id: int
    kind: str
    status: JobStatus
    attempts: int
    max_attempts: int
    run_at: datetime
    locked_until: datetime | None
    last_error: str | None
    created_at: datetime
    finished_at: datetime | None

    @classmethod
    def of(cls, job: Job) -> JobPublic:
        return cls(
            id=job.id,
            kind=job.kind,
            status=job.status,
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            run_at=job.run_at,
            locked_until=job.locked_until,
            last_error=job.last_error,
            created_at=job.created_at,
            finished_at=job.finished_at,
        )


class AttemptPublic(BaseModel):
    attempt: int
    started_at: datetime
    finished_at: datetime
    outcome: str
    error: str | None


class JobDetail(JobPublic):
    history: list[AttemptPublic]
    outcome: MessageOutcomePublic | None = Field(
        description="For a mail job: delivered, bounced or complained, as the provider or "
        "the mailbox reported it (PRV-6); null for other jobs"
    )


@router.get("", summary="List jobs, newest first (filter by status, e.g. dead)")
async def list_jobs(
    container: ContainerDep,
    status: Annotated[JobStatus | None, Query()] = None,
    kind: Annotated[str | None, Query(max_length=64)] = None,
    limit: Limit = 100,
    cursor: Cursor = None,
) -> Page[JobPublic]:
    jobs = await container.queue.list_jobs(
        status=status, kind=kind, before_id=int_cursor(cursor), limit=limit
    )
    return page_of(jobs, limit, JobPublic.of, key=lambda job: job.id)


def _detail(
    job: Job, attempts: list[dict[str, Any]], outcome: MessageOutcomePublic | None
) -> JobDetail:
    history = [AttemptPublic(**{k: a[k] for k in AttemptPublic.model_fields}) for a in attempts]
    return JobDetail(**JobPublic.of(job).model_dump(), history=history, outcome=outcome)


@router.get("/{job_id}", summary="One job with its attempt history (and a mail's outcome)")
async def get_job(container: ContainerDep, job_id: JobId) -> JobDetail:
    job, attempts = await container.queue.get(job_id)
    outcome = await container.message_outcomes.of_job(job_id)
    return _detail(job, attempts, None if outcome is None else MessageOutcomePublic.of(outcome))


@router.post("/{job_id}/replay", summary="Run a dead (or finished) job again")
async def replay_job(container: ContainerDep, job_id: JobId) -> JobPublic:
    return JobPublic.of(await container.queue.replay(job_id))
