"""The sending ETA (SPEC SND-18): remaining work divided by recent throughput. Pure.

A *sample* is one batch's completion: when it happened and how many recipients it settled,
whichever worker did it. The recent rate is the work of the last minute of samples over the
time it took, measured from the sample just before the window (the interval crossing the
boundary) up to now; a sparse send keeps at least its last two intervals. Samples from before
the attempt started belong to an earlier attempt and are left out. The phase's average rate
(its work so far over its time so far) bounds it, and stands alone before two samples exist
(issue 38 item 3). Nothing here reads a clock.
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
# The recent rate is kept within this factor of the phase's average (see `blended_rate`).
AVERAGE_BAND = 1.5


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


def average_rate(done: int, *, phase_started_at: datetime | None, now: datetime) -> float | None:
    """The phase's own pace: the work it has done over the time since it began, or None
    before any work. Read from the batches' counts, which move with every chunk, so it exists
    seconds into a send — long before two batches have finished."""
    if phase_started_at is None or done <= 0:
        return None
    elapsed = (now - phase_started_at).total_seconds()
    return done / elapsed if elapsed > 0 else None


def blended_rate(
    recent: float | None, average: float | None, *, phase_age: timedelta | None
) -> float | None:
    """The rate the ETA divides by. While the phase is younger than the window, its average:
    the last minute *is* the whole phase then, and the average reads it from counts that move
    with every chunk, where the recent rate reads batch completions, which come in bursts
    (two batches finishing together measure a moment, not a pace). Once older, the recent
    rate (`rate_per_second`), which follows a change of pace (workers added, a stall), kept
    within `AVERAGE_BAND`× of the average. Whichever exists when only one does."""
    if recent is None or average is None:
        return recent if average is None else average
    if phase_age is not None and phase_age < WINDOW:
        return average
    return min(max(recent, average / AVERAGE_BAND), average * AVERAGE_BAND)


def eta_seconds(
    *,
    failed: bool,
    remaining: int,
    samples: Sequence[Sample],
    attempt_started_at: datetime,
    now: datetime,
    window: timedelta = WINDOW,
    phase_started_at: datetime | None = None,
    phase_done: int = 0,
) -> int | None:
    """Seconds until the current phase's work is done: None for a failed send or with no
    measure of pace yet (neither two samples of the current attempt nor any work done since
    `phase_started_at`), 0 once nothing remains (which says nothing about the outcome: key
    completion on the status, never on the ETA)."""
    if failed:
        return None
    if remaining <= 0:
        return 0
    recent = rate_per_second(samples, attempt_started_at=attempt_started_at, now=now, window=window)
    average = average_rate(phase_done, phase_started_at=phase_started_at, now=now)
    phase_age = None if phase_started_at is None else now - phase_started_at
    rate = blended_rate(recent, average, phase_age=phase_age)
    if rate is None:
        return None
    return math.ceil(remaining / rate)
