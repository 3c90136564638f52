"""Faults the batch-provider dev server injects: what goes wrong, and for which requests.

A `Fault` names one misbehaviour and how often it strikes: on a fraction `rate` of requests
(1: every one), `times` times (None: no limit). A `FaultPlan` holds faults in
order; each request takes the first one that strikes, and a fault whose `times` run out is
gone. Recipient markers work without any plan, like the SMTP sink's: an address whose local
part holds `+reject550` or `+defer451` is rejected with that status in an accepted batch.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

Action = Literal["accept", "status", "drop_before_accept", "drop_after_accept", "reject"]

RECIPIENT_MARKERS: Mapping[str, tuple[int, bool]] = {
    "+reject550": (550, True),
    "+defer451": (451, False),
}


@dataclass(frozen=True, slots=True)
class Fault:
    """One misbehaviour. Every action first waits `delay_seconds` after reading the request.

    accept: answer normally (with a delay, a slow provider that still accepts).
    status: answer `status` (4xx/5xx) with `retry_after` as the Retry-After header; stores
        nothing.
    drop_before_accept: read the request, store nothing, close the connection unanswered.
    drop_after_accept: store the recipients, then close the connection unanswered.
    reject: accept, but reject a `reject_fraction` of the recipients (chosen by a hash of the
        address, so the same ones every time) with `reject_status`, reported in the answer's
        `rejected` list; `reject_permanent` defaults to `reject_status >= 500`.
    """

    __pydantic_config__ = ConfigDict(extra="forbid")

    action: Action
    times: Annotated[int, Field(ge=1)] | None = None
    rate: Annotated[float, Field(gt=0, le=1)] = 1.0
    delay_seconds: Annotated[float, Field(ge=0, le=3600)] = 0.0
    status: Annotated[int, Field(ge=400, le=599)] = 503
    retry_after: Annotated[str, Field(max_length=100, pattern=r"^[\x20-\x7e]*$")] | None = None
    reject_fraction: Annotated[float, Field(ge=0, le=1)] = 0.5
    reject_status: Annotated[int, Field(ge=400, le=599)] = 550
    reject_permanent: bool | None = None

    def rejects(self, address: str) -> bool:
        digest = hashlib.blake2b(address.encode(), digest_size=8).digest()
        return int.from_bytes(digest) / 2**64 < self.reject_fraction

    def to_json(self) -> dict[str, Any]:
        return _FAULT.dump_python(self, mode="json")  # type: ignore[no-any-return]


_FAULT = TypeAdapter(Fault)
_FAULTS = TypeAdapter(list[Fault])


def parse_faults(data: Any) -> list[Fault]:
    """Faults from JSON: one object or a list. ValueError (safe to show) when invalid."""
    try:
        if isinstance(data, dict):
            return [_FAULT.validate_python(data)]
        return _FAULTS.validate_python(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'fault'}: {error['msg']}"
            for error in exc.errors(include_input=False, include_url=False)
        )
        raise ValueError(problems) from None


def marker_rejection(address: str) -> tuple[int, bool] | None:
    """(status, permanent) for an address carrying a rejection marker, else None."""
    local_part = address.rpartition("@")[0]
    for marker, rejection in RECIPIENT_MARKERS.items():
        if marker in local_part:
            return rejection
    return None


@dataclass(slots=True)
class _Armed:
    fault: Fault
    left: int | None  # strikes left; None: no limit


class FaultPlan:
    """The faults in force, in order, with how many strikes each one has left."""

    def __init__(self, faults: Iterable[Fault] = (), *, seed: int | None = None) -> None:
        self._random = random.Random(seed)
        self._armed: list[_Armed] = []
        self.replace(faults)

    def replace(self, faults: Iterable[Fault]) -> None:
        self._armed = [_Armed(fault, fault.times) for fault in faults]

    def clear(self) -> None:
        self._armed = []

    def pick(self) -> Fault | None:
        """The fault this request gets, if any, counting the strike against its `times`."""
        for armed in self._armed:
            if armed.fault.rate < 1.0 and self._random.random() >= armed.fault.rate:
                continue
            if armed.left is not None:
                armed.left -= 1
                if armed.left == 0:
                    self._armed.remove(armed)
            return armed.fault
        return None

    def to_json(self) -> list[dict[str, Any]]:
        return [{**armed.fault.to_json(), "times_left": armed.left} for armed in self._armed]
