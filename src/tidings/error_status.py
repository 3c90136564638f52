"""The one table from error class to HTTP status, for both entrypoints that answer over HTTP:
the API (problem+json) and the admin UI (error pages)."""

from __future__ import annotations

from tidings.audience.hearing.recording import ReplayedEvent
from tidings.audience.public import LinkProblem
from tidings.campaigns.feeds.service import FeedRunFailed
from tidings.campaigns.lifecycle import EmptyAudience
from tidings.campaigns.reconcile import ReconcileRefused
from tidings.campaigns.retry import ResendRefused, RetryRefused
from tidings.delivery.event_webhooks import SignatureRejected
from tidings.domain.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    NotReady,
    PayloadTooLarge,
    RateLimited,
    TidingsError,
    Unauthenticated,
    UnsupportedMediaType,
)
from tidings.domain.identity import PlaceholderIdentity
from tidings.domain.jobs import DatabaseBusy
from tidings.domain.media import MediaInUse, MediaRefused
from tidings.domain.roles import Forbidden

STATUS_BY_ERROR: dict[type[TidingsError], int] = {
    InvalidInput: 422,
    MediaRefused: 422,
    RetryRefused: 400,
    ResendRefused: 400,
    ReconcileRefused: 409,
    Unauthenticated: 401,
    Forbidden: 403,
    SignatureRejected: 401,
    NotFound: 404,
    LinkProblem: 404,
    Conflict: 409,
    ReplayedEvent: 409,
    PlaceholderIdentity: 409,
    EmptyAudience: 409,
    MediaInUse: 409,
    PayloadTooLarge: 413,
    FeedRunFailed: 502,
    UnsupportedMediaType: 415,
    RateLimited: 429,
    NotReady: 503,
    DatabaseBusy: 503,
    TidingsError: 500,
}


def status_for(error: TidingsError) -> int:
    """The status of `error`'s nearest class in the table (500 for anything unexpected)."""
    for cls in type(error).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return 500


def retry_after(error: TidingsError) -> dict[str, str]:
    """`Retry-After` for a refusal that says when to come back (a rate limit, a busy database)."""
    if isinstance(error, RateLimited | DatabaseBusy):
        return {"Retry-After": str(error.retry_after_seconds)}
    return {}
