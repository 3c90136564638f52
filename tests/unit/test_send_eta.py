"""The sending ETA's arithmetic (SND-18), alone and over many generated histories: when it is
null, when it is 0, how the rate reads the last minute, and that the bounded sample read the
status path makes gives the same answer as the whole history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.eta import WINDOW, Sample, eta_seconds, rate_per_second, relevant

START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@st.composite
def histories(draw: st.DrawFn, min_size: int = 0) -> tuple[list[Sample], datetime]:
    """Samples at irregular times after START (some before it: an earlier attempt), and a
    `now` at or after the last one."""
    gaps = draw(st.lists(st.floats(min_value=0, max_value=90), min_size=min_size, max_size=40))
    works = draw(
        st.lists(st.integers(min_value=0, max_value=1000), min_size=len(gaps), max_size=len(gaps))
    )
    at = START - timedelta(seconds=draw(st.floats(min_value=0, max_value=120)))
    samples = []
    for gap, work in zip(gaps, works, strict=True):
        at += timedelta(seconds=gap)
        samples.append(Sample(at, work))
    last = max([START, *(s.at for s in samples)])
    return samples, last + timedelta(seconds=draw(st.floats(min_value=0, max_value=200)))


def _eta(samples: list[Sample], now: datetime, remaining: int, failed: bool = False) -> int | None:
    return eta_seconds(
        failed=failed, remaining=remaining, samples=samples, attempt_started_at=START, now=now
    )


@given(history=histories(), remaining=st.integers(min_value=0, max_value=10**7))
def test_a_failed_send_never_has_an_eta(
    history: tuple[list[Sample], datetime], remaining: int
) -> None:
    """A failed send is not progressing; any number would promise a finish that won't come."""
    samples, now = history
    assert _eta(samples, now, remaining, failed=True) is None


@given(history=histories())
def test_no_work_left_is_zero_whatever_the_history(history: tuple[list[Sample], datetime]) -> None:
    """0 means the phase's work is done, even when nothing was ever measured."""
    samples, now = history
    assert _eta(samples, now, 0) == 0


@given(
    history=histories(),
    remaining=st.integers(min_value=1, max_value=10**7),
)
def test_the_eta_is_null_until_two_samples_of_this_attempt_exist(
    history: tuple[list[Sample], datetime], remaining: int
) -> None:
    """One completion measures no interval, and samples from before the attempt started
    belong to an earlier one: neither may produce an estimate."""
    samples, now = history
    of_this_attempt = [s for s in samples if s.at >= START]
    if len(of_this_attempt) < 2:
        assert _eta(samples, now, remaining) is None


@given(history=histories(), remaining=st.integers(min_value=1, max_value=10**7))
def test_the_bounded_read_gives_the_same_eta_as_the_whole_history(
    history: tuple[list[Sample], datetime], remaining: int
) -> None:
    """The status path fetches only the window and a few samples before it; that must be
    exactly what the rate reads, or a long send's ETA would depend on how it was read."""
    samples, now = history
    bounded = relevant(samples, attempt_started_at=START, now=now)
    assert len(bounded) <= len([s for s in samples if s.at >= now - WINDOW]) + 3
    assert _eta(bounded, now, remaining) == _eta(samples, now, remaining)


@given(history=histories(min_size=2), remaining=st.integers(min_value=1, max_value=10**6))
def test_more_work_never_means_an_earlier_finish(
    history: tuple[list[Sample], datetime], remaining: int
) -> None:
    """Monotone in the work left: a consumer comparing two sends' ETAs can trust the order."""
    samples, now = history
    first, more = _eta(samples, now, remaining), _eta(samples, now, remaining * 2)
    if first is not None:
        assert more is not None
        assert more >= first >= 1


@given(history=histories(min_size=2), factor=st.integers(min_value=2, max_value=50))
def test_all_workers_work_counts_so_twice_the_throughput_is_twice_the_rate(
    history: tuple[list[Sample], datetime], factor: int
) -> None:
    """Samples are batches finished by any worker: more workers settling more recipients in
    the same time must show as a proportionally higher rate, not as one worker's speed."""
    samples, now = history
    scaled = [Sample(s.at, s.work * factor) for s in samples]
    rate = rate_per_second(samples, attempt_started_at=START, now=now)
    faster = rate_per_second(scaled, attempt_started_at=START, now=now)
    if rate is not None:
        assert faster is not None
        assert abs(faster - rate * factor) <= 1e-9 * faster


@given(
    interval_ms=st.integers(min_value=50, max_value=200_000),
    work=st.integers(min_value=1, max_value=1000),
    count=st.integers(min_value=2, max_value=200),
)
def test_a_steady_send_measures_its_own_pace(interval_ms: int, work: int, count: int) -> None:
    """Batches of `work` every interval: the rate is work/interval whether the window holds
    many samples, a few, or (a sparse send) none but the last two intervals."""
    interval = interval_ms / 1000
    samples = [Sample(START + timedelta(milliseconds=i * interval_ms), work) for i in range(count)]
    rate = rate_per_second(samples, attempt_started_at=START, now=samples[-1].at)
    assert rate is not None
    assert abs(rate - work / interval) <= 1e-6 * (work / interval)


def test_the_interval_crossing_the_window_boundary_is_measured() -> None:
    """A sample 90 s ago anchors the interval crossing the minute boundary: the rate is the
    work since it over the time since it, not the window's work over only 60 s."""
    now = START + timedelta(seconds=200)
    samples = [
        Sample(START + timedelta(seconds=10), 500),  # outside, before the anchor
        Sample(now - timedelta(seconds=90), 100),  # the anchor: its work came before it
        Sample(now - timedelta(seconds=30), 100),
        Sample(now, 80),
    ]
    assert rate_per_second(samples, attempt_started_at=START, now=now) == 180 / 90
    assert _eta(samples, now, 360) == 180


def test_a_stalled_send_slows_its_estimate_down() -> None:
    """Measured up to now, not to the last completion: a send that stopped progressing must
    not keep promising its old pace."""
    samples = [Sample(START, 100), Sample(START + timedelta(seconds=10), 100)]
    soon = _eta(samples, START + timedelta(seconds=10), 1000)
    later = _eta(samples, START + timedelta(seconds=300), 1000)
    assert soon == 100
    assert later is not None
    assert later > soon


@given(
    rate=st.floats(min_value=0.5, max_value=5000),
    total=st.integers(min_value=100, max_value=10**6),
    done_share=st.floats(min_value=0.1, max_value=0.99),
    startup=st.floats(min_value=0, max_value=2),
    burst=st.lists(st.floats(min_value=0, max_value=5), min_size=0, max_size=30),
)
def test_at_a_steady_pace_the_eta_is_within_twice_the_truth_once_a_tenth_is_done(
    rate: float, total: int, done_share: float, startup: float, burst: list[float]
) -> None:
    """The promise on the send page (issue 38 item 3): once a tenth is done at a steady
    pace, the time left shown is never off by more than 2x, however the batch completions
    bunch up (samples at arbitrary times inside the phase)."""
    elapsed = total * done_share / rate
    assume_started = START + timedelta(seconds=startup)
    now = assume_started + timedelta(seconds=elapsed)
    done = round(total * done_share)
    remaining = total - done
    samples = [Sample(now - timedelta(seconds=min(b, elapsed)), 50) for b in burst]
    eta = eta_seconds(
        failed=False,
        remaining=remaining,
        samples=samples,
        attempt_started_at=START,
        now=now,
        phase_started_at=assume_started,
        phase_done=done,
    )
    truth = remaining / rate
    assert eta is not None
    assert truth / 2 <= eta <= 2 * truth + 1  # whole seconds, rounded up


def test_the_average_gives_an_eta_before_two_batches_have_finished() -> None:
    """A send's first batch may take minutes through a paced provider: the chunks its counts
    record give the pace long before a second batch completes."""
    now = START + timedelta(seconds=4)
    eta = eta_seconds(
        failed=False,
        remaining=880,
        samples=[],
        attempt_started_at=START,
        now=now,
        phase_started_at=START,
        phase_done=120,
    )
    assert eta == 30  # 120 in 4 s: 30 a second, 880 left
    assert (
        eta_seconds(
            failed=False,
            remaining=880,
            samples=[],
            attempt_started_at=START,
            now=now,
            phase_started_at=START,
            phase_done=0,
        )
        is None
    )  # nothing done yet: no pace to tell


def test_past_a_minute_the_recent_rate_leads_within_a_band_of_the_average() -> None:
    """An old phase follows its last minute (workers added double the pace shown), but a
    burst of completions cannot make it promise more than 1.5x the phase's average pace."""
    phase_started = START
    now = START + timedelta(minutes=10)
    recent = [Sample(now - timedelta(seconds=50), 1000), Sample(now, 1000)]  # 20/s lately
    average_only = {"phase_started_at": phase_started, "phase_done": 6000}  # 10/s on average
    eta = eta_seconds(
        failed=False,
        remaining=1500,
        samples=recent,
        attempt_started_at=START,
        now=now,
        **average_only,  # type: ignore[arg-type]
    )
    assert eta == 100  # 1500 at 15/s: the recent 20/s held to 1.5x the average's 10/s
    young = START + timedelta(seconds=30)
    bunched = [Sample(young - timedelta(seconds=1), 100), Sample(young, 100)]  # "100/s"
    eta = eta_seconds(
        failed=False,
        remaining=300,
        samples=bunched,
        attempt_started_at=START,
        now=young,
        phase_started_at=START,
        phase_done=300,
    )
    assert eta == 30  # younger than the window: its average (10/s), not the bunched pair
