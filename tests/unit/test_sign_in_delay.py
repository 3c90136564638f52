"""The wait after failed sign-ins (UI-2): none while free, then doubling, never past the cap."""

from hypothesis import given
from hypothesis import strategies as st

from tidings.access.sign_in_limits import delay_after


def test_the_wait_doubles_from_one_second_to_the_cap() -> None:
    """A typo costs nothing, a guesser a second, then two, four…, and never more than a
    minute: slowed, not locked out (issue 35 item 5)."""
    waits = [delay_after(failures, free=3, cap=60) for failures in range(13)]
    assert waits == [0, 0, 0, 1, 2, 4, 8, 16, 32, 60, 60, 60, 60]


@given(
    failures=st.integers(min_value=0, max_value=10**9),
    free=st.integers(min_value=1, max_value=1000),
    cap=st.integers(min_value=1, max_value=900),
)
def test_the_wait_never_exceeds_the_cap_and_grows_with_failures(
    failures: int, free: int, cap: int
) -> None:
    """However many failures a flood piles up, the owner on a new device waits at most the
    cap (no overflow into an hour's lock-out), and one more failure never shortens the wait."""
    wait = delay_after(failures, free=free, cap=cap)
    assert 0 <= wait <= cap
    assert delay_after(failures + 1, free=free, cap=cap) >= wait
    assert (wait == 0) == (failures < free)
