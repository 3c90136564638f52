"""A job as handlers see it, and the typed payload each job kind carries (HOUSE rule 19).

A job kind is a name (a verb: `send_email`) and a frozen dataclass subclassing `JobPayload`:
ids and small values, never message bodies or tokens where an id will do. Producers enqueue
`payload.to_payload()`; the kind's handler reads `Payload.from_job(job)`, which refuses a
malformed payload as a permanent failure (`GiveUp`) rather than failing on every retry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, ClassVar, Self

from pydantic import TypeAdapter

from tidings.domain.jobs import GiveUp, JobStatus


@dataclass(frozen=True, slots=True)
class Job:
    """One row of the job table, as claimed or listed."""

    id: int
    kind: str
    idempotency_key: str
    payload: dict[str, Any]
    status: JobStatus
    attempts: int
    max_attempts: int
    run_at: datetime
    locked_until: datetime | None
    claim_token: str | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


class JobPayload:
    """Base of the payload dataclasses. Subclasses set `kind` and declare their fields;
    they override `to_payload` and `fields_of` only when the stored JSON differs from the
    fields (bytes kept as base64, say)."""

    __slots__ = ()
    kind: ClassVar[str]

    def to_payload(self) -> dict[str, Any]:
        """The JSON object stored in `jobs.payload`."""
        fields: dict[str, Any] = dataclasses.asdict(self)  # type: ignore[call-overload]
        return fields

    @classmethod
    def fields_of(cls, payload: Mapping[str, Any]) -> Mapping[str, Any]:
        """The dataclass fields a stored payload holds (the inverse of `to_payload`)."""
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        """Parse and type-check a stored payload; raises ValueError when it does not fit."""
        adapter = _adapter(cls)  # type: ignore[arg-type]
        parsed: Self = adapter.validate_python(dict(cls.fields_of(payload)))
        return parsed

    @classmethod
    def from_job(cls, job: Job) -> Self:
        """The job's payload as this type; `GiveUp` when it is of another kind or malformed
        (retrying cannot fix it). The reason names the kind only: payloads hold addresses."""
        if job.kind != cls.kind:
            raise GiveUp(f"a {job.kind} job is not a {cls.kind} job")
        try:
            return cls.from_payload(job.payload)
        except (ValueError, TypeError, KeyError):
            raise GiveUp(f"malformed {job.kind} payload") from None


@cache
def _adapter(payload_type: type[JobPayload]) -> TypeAdapter[Any]:
    # Built once per payload type, on first use.
    return TypeAdapter(payload_type)
