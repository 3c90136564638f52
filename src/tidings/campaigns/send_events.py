"""The send's structured events (SPEC SND-16). The event name is the selector; every event
has `code`, `email_id` (the campaign id) and `reason`, and `batch_id` when a batch is known.
Ids and counts only: never an address, a name, a token or provider text (PRI-5)."""

from __future__ import annotations

from typing import Any

import structlog

from tidings.domain.sending import Exclusion, VerificationFailed

log = structlog.get_logger("tidings.campaigns")

EXCLUDED_CODE = "recipient_excluded"
# Every event name this module emits: the documented, stable selectors.
EVENT_NAMES = (
    "email.recipient_count.mismatch",
    "email.verification.failed",
    "email.batch.submitted",
    "email.submission.verified",
    "email.preparation.audience_drift",
    "email.preparation.excluded",
    "email.submission.excluded",
)
# Expected churn between selection and send is information; invalid data is an error.
_INFO_EXCLUSIONS = frozenset({Exclusion.MEMBER_NOT_FOUND.value, Exclusion.CONSENT_WITHDRAWN.value})


def excluded(
    phase: str, campaign_id: int, member_id: int | None, reason: str, **where: Any
) -> None:
    """`email.preparation.excluded` or `email.submission.excluded` for one recipient."""
    level = "info" if reason in _INFO_EXCLUSIONS else "error"
    getattr(log, level)(
        f"email.{phase}.excluded",
        code=EXCLUDED_CODE,
        email_id=campaign_id,
        member_id=member_id,
        reason=reason,
        **where,
    )


def verification_failed(campaign_id: int, error: VerificationFailed) -> None:
    """`email.recipient_count.mismatch` for two known, unequal counts; otherwise
    `email.verification.failed`. Both at error level."""
    log.error(
        error.event,
        email_id=campaign_id,
        retryable=False,
        can_rebuild=False,
        count_mismatch=error.is_count_mismatch,
        **error.fields(),
    )


def batch_submitted(
    campaign_id: int,
    batch_id: int,
    *,
    recipient_count: int,
    submitted_count: int,
    submission_excluded_count: int,
    provider_message_id: str | None,
) -> None:
    log.info(
        "email.batch.submitted",
        code="batch_submitted",
        email_id=campaign_id,
        batch_id=batch_id,
        reason="submitted",
        recipient_count=recipient_count,
        submitted_count=submitted_count,
        submission_excluded_count=submission_excluded_count,
        provider_message_id=provider_message_id,
    )


def submission_verified(
    campaign_id: int,
    *,
    candidate_count: int,
    submitted_count: int,
    excluded_count: int,
    failed_count: int,
    uncertain_count: int,
) -> None:
    log.info(
        "email.submission.verified",
        code="submission_verified",
        email_id=campaign_id,
        reason="verified",
        candidate_count=candidate_count,
        submitted_count=submitted_count,
        excluded_count=excluded_count,
        failed_count=failed_count,
        uncertain_count=uncertain_count,
    )


def audience_drift(campaign_id: int, *, preflight: int, consumed: int) -> None:
    log.warning(
        "email.preparation.audience_drift",
        code="audience_drift",
        email_id=campaign_id,
        reason="preflight_differs",
        expected=preflight,
        actual=consumed,
    )
