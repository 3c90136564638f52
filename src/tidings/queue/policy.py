"""Queue timing policy and the handler registry: what runs, how often, how many at once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta

from tidings.domain.errors import TidingsError
from tidings.queue.job import Job

Handler = Callable[[Job], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    """The queue's timing. No defaults here: they are the `queue.*` settings, defined once
    in `tidings.config` and turned into a policy by `bootstrap.queue_policy`."""

    lease_seconds: float
    poll_interval_seconds: float
    max_attempts: int
    backoff_base_seconds: float
    backoff_max_seconds: float
    shutdown_grace_seconds: float
    prune_interval_seconds: float
    retention_days: float

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.lease_seconds)

    @property
    def reap_interval_seconds(self) -> float:
        """How often expired leases are looked for: a job whose worker died is due again
        within a quarter of a lease after its lease ran out."""
        return self.lease_seconds / 4


class DuplicateHandler(TidingsError):
    code = "duplicate_handler"
    title = "Two handlers registered for one job kind"


@dataclass(frozen=True, slots=True)
class Registration:
    kind: str
    handler: Handler
    concurrency: int
    # Handlers of short jobs run under a deadline well inside the lease; long jobs (a campaign
    # batch) instead renew their lease while they work and take no overall deadline.
    timeout_seconds: float | None
    renew_lease: bool


class HandlerRegistry:
    """Exactly one handler per job kind (SPEC SND-22): two consumers of one kind racing and
    silently dropping work is a known failure mode, so a second registration is an error."""

    def __init__(self) -> None:
        self._by_kind: dict[str, Registration] = {}

    def register(
        self,
        kind: str,
        handler: Handler,
        *,
        concurrency: int = 4,
        timeout_seconds: float | None = None,
        renew_lease: bool = False,
    ) -> None:
        if kind in self._by_kind:
            raise DuplicateHandler(f"a handler for job kind {kind!r} is already registered")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._by_kind[kind] = Registration(kind, handler, concurrency, timeout_seconds, renew_lease)

    def __iter__(self) -> Iterator[Registration]:
        return iter(self._by_kind.values())

    def __len__(self) -> int:
        return len(self._by_kind)

    def kinds(self) -> list[str]:
        return list(self._by_kind)
