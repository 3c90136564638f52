"""The one test clock: stands still until a test moves it (HOUSE rule 14: fake only the
world outside the machine)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

START = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    """Pass it wherever a `Clock` goes (`bootstrap.build(settings, clock=Clock())`, a service
    under test); set or advance `now` to move time."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta = timedelta(minutes=5)) -> datetime:
        self.now += delta
        return self.now
