"""The one error root. Subclasses carry a stable `code`; the API maps classes to statuses."""

from __future__ import annotations

from typing import Any, ClassVar


class TidingsError(Exception):
    """Base of every error tidings raises on purpose. `detail` is safe to show to the caller."""

    code: ClassVar[str] = "error"
    title: ClassVar[str] = "Something went wrong"

    def __init__(self, detail: str | None = None, *, field: str | None = None) -> None:
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        self.field = field

    def problem_fields(self) -> dict[str, Any]:
        """Extra members of the problem+json body (ids the caller can act on); none here."""
        return {}


class InvalidInput(TidingsError):
    code = "invalid_input"
    title = "The request is not valid"


class PayloadTooLarge(TidingsError):
    code = "payload_too_large"
    title = "The request body is too large"


class UnsupportedMediaType(TidingsError):
    """The body's Content-Type is not one the route reads (a JSON route sent a form post)."""

    code = "unsupported_media_type"
    title = "The body is not in a format this route accepts"


class Unauthenticated(TidingsError):
    code = "unauthenticated"
    title = "A valid API key is required"


class NotFound(TidingsError):
    code = "not_found"
    title = "Not found"


class Conflict(TidingsError):
    code = "conflict"
    title = "The request conflicts with the current state"


class RateLimited(TidingsError):
    code = "rate_limited"
    title = "Too many requests"

    def __init__(self, detail: str | None = None, *, retry_after_seconds: int) -> None:
        super().__init__(detail)
        self.retry_after_seconds = retry_after_seconds


class NotReady(TidingsError):
    code = "not_ready"
    title = "The service is not ready"


class DatabaseUnreachable(NotReady):
    """No connection to the database could be made. `detail` is what an API client sees;
    `diagnosis` is the operator's one line: the URL (password masked), what the driver
    said, and what to check."""

    def __init__(self, diagnosis: str) -> None:
        super().__init__("the database is not reachable")
        self.diagnosis = diagnosis
