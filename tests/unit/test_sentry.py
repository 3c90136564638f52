"""Optional Sentry reporting: error-level events reach Sentry with their fields and nothing
personal; without a DSN nothing is sent and nothing needs installing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
import sentry_sdk
import structlog
from sentry_sdk.envelope import Envelope
from sentry_sdk.transport import Transport

from tidings.observability.logging import configure_logging
from tidings.observability.sentry import configure_sentry


class Captured(Transport):
    """Keeps what would have been sent to Sentry (the outside world) in memory."""

    events: ClassVar[list[dict[str, Any]]] = []

    def capture_envelope(self, envelope: Envelope) -> None:
        for item in envelope.items:
            if item.type == "event" and item.payload.json is not None:
                self.events.append(item.payload.json)


@pytest.fixture
def sentry() -> Iterator[list[dict[str, Any]]]:
    Captured.events = []
    assert configure_sentry("https://key@sentry.invalid/1", transport=Captured)
    configure_logging("info", "json")
    try:
        yield Captured.events
    finally:
        configure_sentry(None)
        sentry_sdk.get_client().close()


def test_error_events_are_reported_with_their_fields(sentry: list[dict[str, Any]]) -> None:
    """An operator paged by Sentry needs the event name and the ids to act on."""
    log = structlog.get_logger("tidings.campaigns")
    log.error("email.recipient_count.mismatch", email_id=7, batch_id=3, expected=10, actual=9)
    log.info("email.batch.submitted", email_id=7, batch_id=3)
    sentry_sdk.flush()
    (event,) = sentry
    assert event["message"] == "email.recipient_count.mismatch"
    assert event["extra"]["batch_id"] == 3
    assert event["extra"]["expected"] == 10
    assert event["tags"]["event"] == "email.recipient_count.mismatch"
    assert "user" not in event
    assert "request" not in event


def test_without_a_dsn_sentry_stays_off() -> None:
    """Sentry is optional: no DSN, no reporting, no error."""
    assert configure_sentry(None) is False
    assert configure_sentry("") is False
