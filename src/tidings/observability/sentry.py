"""Optional Sentry reporting of error-level events (SPEC SND-16), only when a DSN is set and
`sentry-sdk` is installed (`pip install 'tidings[sentry]'`). Events are sent with their
structured fields, which carry ids and counts only (PRI-5); no request data, no PII."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

_enabled = False


def configure_sentry(dsn: str | None, *, environment: str | None = None, **options: Any) -> bool:
    """Start reporting if `dsn` is set; returns whether Sentry is on. A DSN without the
    library is a configuration mistake worth saying out loud, not silently ignoring."""
    global _enabled
    if not dsn:
        _enabled = False
        return False
    try:
        import sentry_sdk
    except ImportError as exc:
        raise RuntimeError(
            "a Sentry DSN is set but sentry-sdk is not installed: pip install 'tidings[sentry]'"
        ) from exc
    sentry_sdk.init(
        dsn=dsn,
        environment=environment,
        # We report structured events ourselves; no integrations means no request data.
        default_integrations=False,
        **options,
    )
    _enabled = True
    return True


def report_errors(
    _logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: error-level events go to Sentry as messages with their fields."""
    if _enabled and method_name in ("error", "critical", "exception"):
        import sentry_sdk

        with sentry_sdk.new_scope() as scope:
            for key, value in event_dict.items():
                if key != "event":
                    scope.set_extra(key, value)
            scope.set_tag("event", str(event_dict.get("event")))
            sentry_sdk.capture_message(str(event_dict.get("event")), level="error")
    return event_dict
