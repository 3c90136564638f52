"""The sending ETA (SPEC SND-18): remaining work divided by recent throughput. Pure.

A *sample* is one batch's completion: when it happened and how many recipients it settled,
whichever worker did it. The rate is the work of the last minute of samples over the time it
took, measured from the sample just before the window (the interval crossing the boundary)
up to now; a sparse send keeps at least its last two intervals. Samples from before the
attempt started belong to an earlier attempt and are left out. Nothing here reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

WINDOW = timedelta(minutes=1)
# The rate needs at most this many samples from before the window: the anchor of the interval
# crossing the boundary, or the three that make two intervals when the window is empty.
SAMPLES_BEFORE_WINDOW = 3
MIN_SAMPLES = 2


@dataclass(frozen=True, slots=True)
class Sample:
    """One completion: `work` recipients settled at `at` (a batch written or finished)."""

    at: datetime
    work: int


def current(samples: Sequence[Sample], attempt_started_at: datetime) -> list[Sample]:
    """The samples of the current attempt, oldest first."""
    return sorted((s for s in samples if s.at >= attempt_started_at), key=lambda s: s.at)


def relevant(
    samples: Sequence[Sample],
    *,
    attempt_started_at: datetime,
    now: datetime,
    window: timedelta = WINDOW,
) -> list[Sample]:
    """The only samples the rate can read: those in the window and up to
    `SAMPLES_BEFORE_WINDOW` just before it. Storage fetches exactly these, so a status read
    costs the same an hour into a send as a minute in."""
    ordered = current(samples, attempt_started_at)
    first_in_window = next(
        (index for index, sample in enumerate(ordered) if sample.at >= now - window),
        len(ordered),
    )
    return ordered[max(0, first_in_window - SAMPLES_BEFORE_WINDOW) :]


def rate_per_second(
    samples: Sequence[Sample],
    *,
    attempt_started_at: datetime,
    now: datetime,
    window: timedelta = WINDOW,
) -> float | None:
    """Recipients settled per second, or None without two samples of the current attempt."""
    ordered = current(samples, attempt_started_at)
    if len(ordered) < MIN_SAMPLES:
        return None
    first_in_window = next(
        (index for index, sample in enumerate(ordered) if sample.at >= now - window),
        len(ordered),
    )
    # The interval crossing the boundary starts at the last sample before the window; a
    # sparse send still measures its last two intervals.
    anchor = min(max(0, first_in_window - 1), max(0, len(ordered) - 3))
    work = sum(sample.work for sample in ordered[anchor + 1 :])  # the anchor's came before it
    elapsed = (max(now, ordered[-1].at) - ordered[anchor].at).total_seconds()
    if work <= 0 or elapsed <= 0:
        return None
    return work / elapsed


def eta_seconds(
    *,
    failed: bool,
    remaining: int,
    samples: Sequence[Sample],
    attempt_started_at: datetime,
    now: datetime,
    window: timedelta = WINDOW,
) -> int | None:
    """Seconds until the current phase's work is done: None for a failed send or without
    two samples of the current attempt, 0 once nothing remains (which says nothing about
    the outcome: key completion on the status, never on the ETA)."""
    if failed:
        return None
    if remaining <= 0:
        return 0
    rate = rate_per_second(samples, attempt_started_at=attempt_started_at, now=now, window=window)
    if rate is None:
        return None
    return math.ceil(remaining / rate)
