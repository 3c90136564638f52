"""Job statuses and the outcomes a handler can report. Pure."""

from __future__ import annotations

from enum import StrEnum

from tidings.domain.errors import TidingsError


class JobStatus(StrEnum):
    PENDING = "pending"  # waiting for its due time, or for a retry
    RUNNING = "running"  # claimed under a lease; reclaimable once the lease expires
    DONE = "done"
    DEAD = "dead"  # out of attempts, or failed permanently: visible and replayable


class RetryLater(TidingsError):
    """A handler's transient failure. `reason` is stored and logged: no personal data."""

    code = "job_retry"

    def __init__(self, reason: str, *, retry_after_seconds: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after_seconds = retry_after_seconds


class DatabaseBusy(RetryLater):
    """The database could not take the work now: SQLite's write lock stayed held past the busy
    timeout, or PostgreSQL gave up on a lock, a deadlock or the connection pool. Nothing was
    written. An API request answers 503 with Retry-After; a job handler that meets it is a
    `RetryLater` like any other, retried with backoff instead of counted as a crash."""

    code = "database_busy"
    title = "The database is busy"

    def __init__(self, *, retry_after_seconds: int = 2) -> None:
        super().__init__(
            "the database is busy; try again shortly", retry_after_seconds=retry_after_seconds
        )
        self.retry_after_seconds: int = retry_after_seconds


class GiveUp(TidingsError):
    """A handler's permanent failure: the job goes straight to `dead`."""

    code = "job_failed_permanently"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Defer(TidingsError):
    """Not attempted now because a shared resource is busy (a slow webhook host's slots):
    the job is due again after `seconds` without spending one of its attempts."""

    code = "job_deferred"

    def __init__(self, reason: str, *, seconds: float) -> None:
        super().__init__(reason)
        self.reason = reason
        self.seconds = seconds


class ClaimLost(TidingsError):
    """A handler's fenced write was refused: its claim token no longer holds the job (the lease
    ran out and another worker reclaimed it). Nothing was written; the handler must stop."""

    code = "job_claim_lost"
