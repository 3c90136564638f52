"""The rules around resuming a send (SND-20): how its age is counted, and the settings that
bound resumption, validated at start-up like every other key."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tidings.campaigns.recovery import started_at
from tidings.config import ConfigurationError, load_settings
from tidings.storage.sending.campaign_sends import ActiveSend

MONDAY = datetime(2026, 3, 2, 9, tzinfo=UTC)


def _send(*, scheduled_at: datetime | None) -> ActiveSend:
    return ActiveSend(1, "submitting", 1, MONDAY, scheduled_at, None)


def test_a_scheduled_send_is_as_old_as_its_schedule_time_not_its_request() -> None:
    """A campaign scheduled on Monday for Thursday is due on Thursday; counting its age from
    Monday would refuse to resume it the moment it became due."""
    thursday = MONDAY + timedelta(days=3)
    assert started_at(_send(scheduled_at=thursday)) == thursday
    assert started_at(_send(scheduled_at=None)) == MONDAY
    # A schedule in the past of the attempt (sent early by hand) does not make it younger.
    assert started_at(_send(scheduled_at=MONDAY - timedelta(days=1))) == MONDAY


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("24h", timedelta(hours=24)),
        ("90m", timedelta(minutes=90)),
        ("2d", timedelta(days=2)),
        ("3600", timedelta(hours=1)),
        ("PT6H", timedelta(hours=6)),
        (7200, timedelta(hours=2)),
    ],
)
def test_resume_max_age_reads_the_forms_operators_write(given: object, expected: timedelta) -> None:
    """Operators set it in an environment variable or TOML; `24h` must mean what it says."""
    settings = load_settings(bulk_email={"resume_max_age": given})
    assert settings.bulk_email.resume_max_age == expected


@pytest.mark.parametrize("given", ["soon", "-1h", "0", "31d"])
def test_a_bad_resume_max_age_stops_start_up_naming_the_key(given: str) -> None:
    """A typo must stop the worker with the key named, not silently resume everything (or
    nothing) after an outage."""
    with pytest.raises(ConfigurationError, match="TIDINGS_BULK_EMAIL_RESUME_MAX_AGE"):
        load_settings(bulk_email={"resume_max_age": given})


def test_the_sweep_interval_is_bounded() -> None:
    """A zero interval would spin the sweep; it is refused at start-up with the key named."""
    with pytest.raises(ConfigurationError, match="TIDINGS_BULK_EMAIL_SWEEP_INTERVAL_SECONDS"):
        load_settings(bulk_email={"sweep_interval_seconds": 0})
