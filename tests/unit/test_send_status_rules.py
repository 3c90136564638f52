"""A send's status derived from its batches (SND-17), retry eligibility (SND-19) and which
failures a retry may send again: the pure rules, alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.eta import Sample
from tidings.domain.send_status import (
    BatchGroup,
    Phase,
    RetryBlock,
    SendRecord,
    derive_status,
    is_resendable_failure,
    phase_of,
    retry_blocked_by,
)
from tidings.domain.sending import VERIFICATION_CODE, BatchStatus, CampaignStatus

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _send(**values: object) -> SendRecord:
    record: dict[str, object] = {
        "attempt": 1,
        "attempt_started_at": NOW - timedelta(minutes=5),
        "preflight_email_count": 100,
        "candidate_count": 100,
        "preparation_excluded_count": 4,
        "prepared_at": NOW - timedelta(minutes=4),
        "email_count": None,
        "excluded_count": None,
        "failed_count": None,
        "uncertain_count": None,
        "failed_during": None,
        "error_code": None,
        "error": None,
    }
    record.update(values)
    return SendRecord(**record)  # type: ignore[arg-type]


def _group(status: BatchStatus, recipients: int, **values: int | bool) -> BatchGroup:
    fields: dict[str, int | bool] = {
        "awaiting_reconcile": False,
        "batches": 1,
        "claimed": 0 if status == BatchStatus.PENDING else 1,
        "positions": recipients,
    }
    fields.update(values)
    return BatchGroup(status, recipients=recipients, **fields)  # type: ignore[arg-type]


def test_phase_is_preparing_until_a_batch_leaves_pending_and_stays_submitting() -> None:
    """A retried send whose batches went back to pending is still past preparation: its
    batches were claimed before, so it reports submitting with frozen progress."""
    assert phase_of([]) == Phase.PREPARING
    assert phase_of([_group(BatchStatus.PENDING, 50)]) == Phase.PREPARING
    assert phase_of([_group(BatchStatus.PENDING, 50), _group(BatchStatus.SUBMITTING, 46)]) == (
        Phase.SUBMITTING
    )
    assert phase_of([_group(BatchStatus.PENDING, 96, claimed=1)]) == Phase.SUBMITTING


def test_an_active_send_counts_exclusions_as_processed_work() -> None:
    """Completed is recipients processed: a send with exclusions must still reach its total,
    and the total is every prepared recipient plus the preparation's exclusions."""
    groups = [
        _group(BatchStatus.SUBMITTED, 50, sent=45, excluded=3, failed=1, uncertain=1),
        _group(BatchStatus.PENDING, 46),
    ]
    found = derive_status(CampaignStatus.SUBMITTING, _send(), groups, [], now=NOW)
    assert (found.phase, found.completed, found.total) == (Phase.SUBMITTING, 54, 100)
    assert found.recipients.excluded == 7
    assert (found.recipients.sent, found.recipients.failed, found.recipients.uncertain) == (
        45,
        1,
        1,
    )
    assert found.eta_seconds is None  # no samples yet
    assert found.retryable is False


def test_eta_uses_the_remaining_work_of_batches_still_owing_it() -> None:
    """Two batches of 50 finished 10 s apart: 5/s; the 46 pending recipients take 10 s."""
    groups = [
        _group(BatchStatus.SUBMITTED, 100, sent=100, batches=2),
        _group(BatchStatus.PENDING, 46),
    ]
    samples = [Sample(NOW - timedelta(seconds=10), 50), Sample(NOW, 50)]
    found = derive_status(CampaignStatus.SUBMITTING, _send(), groups, samples, now=NOW)
    assert found.eta_seconds == 10


def test_a_batch_awaiting_reconcile_is_not_remaining_work() -> None:
    """Nothing will happen to an uncertain batch until an operator decides: the ETA reaches
    0 while completed is below total, and consumers key completion on the status."""
    groups = [
        _group(BatchStatus.SUBMITTED, 50, sent=50),
        _group(BatchStatus.SUBMITTING, 46, awaiting_reconcile=True, uncertain=46),
    ]
    found = derive_status(CampaignStatus.SUBMITTING, _send(), groups, [], now=NOW)
    assert found.eta_seconds == 0
    assert found.completed == 100  # uncertain recipients are processed


def test_preparation_progress_counts_pages_written_of_the_candidates() -> None:
    """While pages are written, completed counts every candidate of a written page (its
    exclusions too) and total is the selection's count; once prepared no work remains."""
    unprepared = _send(
        prepared_at=None,
        preparation_excluded_count=None,
        candidate_count=120,
        attempt_started_at=NOW - timedelta(seconds=2),  # a steady 25/s since it began
    )
    groups = [_group(BatchStatus.PENDING, 48, positions=50, batches=1)]
    samples = [Sample(NOW - timedelta(seconds=1), 25), Sample(NOW, 25)]
    found = derive_status(CampaignStatus.PENDING, unprepared, groups, samples, now=NOW)
    assert (found.phase, found.completed, found.total) == (Phase.PREPARING, 50, 120)
    assert found.eta_seconds == 3  # 70 candidates at 25/s
    prepared = derive_status(
        CampaignStatus.SUBMITTING, _send(), [_group(BatchStatus.PENDING, 96)], [], now=NOW
    )
    assert (prepared.phase, prepared.completed, prepared.total, prepared.eta_seconds) == (
        Phase.PREPARING,
        100,
        100,
        0,
    )


def test_before_selection_the_preflight_count_is_the_total() -> None:
    """Until the audience is selected the only estimate is the preflight count."""
    fresh = _send(prepared_at=None, candidate_count=None, preparation_excluded_count=None)
    found = derive_status(CampaignStatus.PENDING, fresh, [], [], now=NOW)
    assert (found.phase, found.completed, found.total, found.eta_seconds) == (
        Phase.PREPARING,
        0,
        100,
        None,
    )


def test_a_submitted_send_answers_from_its_verified_totals() -> None:
    """No batch is needed: the finalise stored what it verified."""
    done = _send(email_count=90, excluded_count=6, failed_count=3, uncertain_count=1)
    found = derive_status(CampaignStatus.SUBMITTED, done, [], [], now=NOW)
    assert (found.completed, found.total, found.eta_seconds, found.phase) == (100, 100, 0, None)
    assert (found.recipients.sent, found.recipients.uncertain) == (90, 1)


def test_a_failed_send_has_no_eta_and_says_where_and_whether_to_retry() -> None:
    """The admin needs the reason, the phase it stopped in and a trustworthy retry flag."""
    failed = _send(failed_during="submitting", error_code="batch_failed", error="refused")
    groups = [_group(BatchStatus.FAILED, 50), _group(BatchStatus.SUBMITTED, 46, sent=46)]
    samples = [Sample(NOW - timedelta(seconds=1), 46), Sample(NOW, 46)]
    found = derive_status(CampaignStatus.FAILED, failed, groups, samples, now=NOW)
    assert (found.phase, found.failed_during, found.eta_seconds) == (None, "submitting", None)
    assert (found.retryable, found.error_code, found.completed, found.total) == (
        True,
        "batch_failed",
        50,
        100,
    )
    stuck = [*groups, _group(BatchStatus.SUBMITTING, 4, awaiting_reconcile=True)]
    assert derive_status(CampaignStatus.FAILED, failed, stuck, [], now=NOW).retryable is False


def test_failed_during_is_read_from_the_batches_not_from_the_step_that_noticed() -> None:
    """A send whose batches went out stopped while submitting, whichever job step recorded
    the failure (a resumed send's preparation step, say); one with no batch claimed stopped
    while preparing. The admin reads progress of that phase."""
    noticed_early = _send(failed_during="preparing", error_code="batch_failed", error="x")
    claimed = [
        _group(BatchStatus.PENDING, 50, claimed=1),
        _group(BatchStatus.SUBMITTED, 46, sent=46),
    ]
    found = derive_status(CampaignStatus.FAILED, noticed_early, claimed, [], now=NOW)
    assert (found.failed_during, found.completed, found.total) == ("submitting", 50, 100)
    noticed_late = _send(failed_during="submitting", prepared_at=None, candidate_count=None)
    unclaimed = [_group(BatchStatus.PENDING, 50)]
    found = derive_status(CampaignStatus.FAILED, noticed_late, unclaimed, [], now=NOW)
    assert found.failed_during == "preparing"


@given(
    status=st.sampled_from(CampaignStatus),
    error_code=st.sampled_from(
        [None, "batch_failed", "batch_outcome_uncertain", VERIFICATION_CODE]
    ),
    submitting=st.integers(min_value=0, max_value=3),
)
def test_retry_runs_only_on_a_failed_send_without_submitting_batches_or_bad_counts(
    status: CampaignStatus, error_code: str | None, submitting: int
) -> None:
    """SND-19 and SND-15 in one rule, used by the status flag and the retry endpoint alike:
    a submitting batch may have been accepted, and a verification failure would repeat."""
    block = retry_blocked_by(status, error_code, submitting)
    allowed = (
        status == CampaignStatus.FAILED and error_code != VERIFICATION_CODE and submitting == 0
    )
    assert (block is None) == allowed
    if status == CampaignStatus.FAILED and error_code == VERIFICATION_CODE:
        assert block == RetryBlock.VERIFICATION


@pytest.mark.parametrize(
    ("reason", "resendable"),
    [
        ("smtp_temporary_451", True),
        ("smtp_deferred_452", True),
        ("mailgun_deferred_421", True),
        ("smtp_temporary", True),
        ("reconciled_not_sent", True),
        ("smtp_permanent_550", False),
        ("smtp_rejected_550", False),
        ("mailgun_rejected_550", False),
        ("smtp_rejected_554", True),  # relay access denied: the sender refused, not the reader
        ("smtp_rejected_530", True),
        ("smtp_rejected_535", True),
        ("smtp_permanent_530", True),
        ("smtp_permanent_554", False),  # DATA refused: the message, not only the sender
        ("provider_error_KeyError", False),
        ("in_flight_at_crash", False),
        (None, False),
    ],
)
def test_only_transient_failures_sender_refusals_and_unsent_batches_are_sent_again(
    reason: str | None, resendable: bool
) -> None:
    """A permanent rejection resent is a bounce and a reputation cost; a deferral, a batch
    the provider never had, or a relay refusing the sender (issue 35 item 9) is a reader who
    has not got the issue yet."""
    assert is_resendable_failure(reason) is resendable


@given(
    sizes=st.lists(
        st.tuples(
            st.sampled_from(BatchStatus),
            st.integers(min_value=1, max_value=1000),
            st.floats(min_value=0, max_value=1),
        ),
        max_size=12,
    ),
    excluded=st.integers(min_value=0, max_value=100),
)
def test_progress_never_exceeds_its_total(
    sizes: list[tuple[BatchStatus, int, float]], excluded: int
) -> None:
    """A bar past 100% or a negative remainder would be a lie on the admin's screen."""
    groups = [
        _group(status, size, sent=int(size * share), claimed=1) for status, size, share in sizes
    ]
    send = _send(preparation_excluded_count=excluded)
    for status in (CampaignStatus.PENDING, CampaignStatus.SUBMITTING, CampaignStatus.FAILED):
        found = derive_status(status, send, groups, [], now=NOW)
        assert 0 <= found.completed <= found.total
        assert found.eta_seconds is None or found.eta_seconds >= 0


def test_the_badge_and_the_phase_are_one_word_whatever_the_send_looks_like() -> None:
    """The page's badge and its progress panel read the same `stage`: a send marked
    `submitting` before any batch is claimed is still preparing to the operator, a resumed
    `pending` send whose batches went out is submitting, and a paused send is paused."""
    unclaimed = [_group(BatchStatus.PENDING, 96)]
    claimed = [_group(BatchStatus.PENDING, 46, claimed=1), _group(BatchStatus.SUBMITTED, 50)]
    cases = [
        (CampaignStatus.SUBMITTING, unclaimed, "preparing"),
        (CampaignStatus.PENDING, claimed, "submitting"),
        (CampaignStatus.SUBMITTING, claimed, "submitting"),
        (CampaignStatus.PAUSED, claimed, "paused"),
        (CampaignStatus.FAILED, claimed, "failed"),
    ]
    for status, groups, word in cases:
        found = derive_status(status, _send(), groups, [], now=NOW)
        assert found.stage == word, status


def test_a_cancel_not_yet_closed_shows_the_totals_its_close_will_record() -> None:
    """Right after a cancel the page must not show zeros that change on reload: whoever a
    batch still owed is counted `cancelled`, as the close will make them."""
    groups = [
        _group(BatchStatus.SUBMITTED, 40, sent=38, failed=2),
        _group(BatchStatus.PENDING, 36, claimed=1, sent=10, excluded=1),
        _group(BatchStatus.FAILED, 20, failed=5),  # its unsent wait for a retry, not a cancel
    ]
    found = derive_status(CampaignStatus.CANCELLED, _send(), groups, [], now=NOW)
    assert found.closing
    assert found.stage == "cancelled"
    totals = found.recipients
    assert (totals.sent, totals.failed, totals.cancelled) == (48, 7, 25)
    assert totals.excluded == 4 + 1  # the preparation's and the batch's
    closed = derive_status(CampaignStatus.CANCELLED, _send(cancelled_count=25), groups, [], now=NOW)
    assert not closed.closing
