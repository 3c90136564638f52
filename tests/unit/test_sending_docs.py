"""docs/sending.md documents every send event, error code, recipient state and setting in the
rows of its tables (HOUSE rule 18), not merely somewhere on the page."""

from __future__ import annotations

import re
from pathlib import Path

from tidings.campaigns.jobs.finalise_campaign import BatchFailed, OutcomeUncertain
from tidings.campaigns.send_events import EVENT_NAMES
from tidings.config import iter_keys
from tidings.domain.sending import RecipientState, VerificationFailed

DOC = (Path(__file__).parents[2] / "docs" / "sending.md").read_text()


def _first_cells(heading: str) -> set[str]:
    """The backticked names in the first column of the table under `heading`."""
    section = DOC.split(f"# {heading}\n", 1)[1]
    section = re.split(r"\n#{2,3} ", section, maxsplit=1)[0]
    names = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            names.add(line.split("|")[1].strip().strip("`"))
    return names


def test_every_send_event_has_a_row() -> None:
    """Operators select events by name; an undocumented one is an alert nobody writes."""
    assert set(EVENT_NAMES) <= _first_cells("Events (SND-16)")


def test_every_send_error_code_has_a_row() -> None:
    """The admin banner shows the code; the docs must say what it means and if retry helps."""
    codes = {VerificationFailed.code, OutcomeUncertain.code, BatchFailed.code}
    assert codes <= _first_cells("Verification failures")


def test_every_recipient_state_has_a_row() -> None:
    """States are what operators count after a send; each must be explained, and a state
    the code no longer has must not be (the table is the code's list)."""
    assert {state.value for state in RecipientState} == _first_cells("Recipient states")


def test_every_fault_leads_to_states_the_code_has() -> None:
    """The fault table says where readers end after each fault: every state it names is one
    of the code's, and every state is reached by some fault (a state no fault explains is
    one an operator cannot account for)."""
    section = DOC.split("# What each fault leads to\n", 1)[1]
    section = re.split(r"\n#{2,3} ", section, maxsplit=1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    named = set()
    for row in rows[1:]:  # the header row names no state
        outcome = row.split("|")[2]
        found = set(re.findall(r"`([a-z_]+)`", outcome))
        assert found, f"a fault with no state: {row}"
        named |= found
    states = {state.value for state in RecipientState}
    reasons = {"consent_withdrawn"}  # an exclusion's reason, named beside its state
    assert named - reasons <= states
    assert states <= named


def test_every_bulk_email_setting_has_a_row() -> None:
    """A sending knob absent from the sending guide is one operators cannot find."""
    keys = {key for key, _ in iter_keys() if key.startswith("bulk_email.")}
    assert keys
    assert keys <= _first_cells("Settings")


def test_every_status_field_has_a_row() -> None:
    """Admin UIs and scripts read the status endpoint; a field nobody explains is a field
    someone misreads (is `completed` messages sent? it is not)."""
    from tidings.api.admin.send_views import SendStatusPublic

    assert set(SendStatusPublic.model_fields) == _first_cells(
        "Status, progress and ETA (SND-17, SND-18)"
    )


def test_every_refusal_of_a_repair_is_explained() -> None:
    """Retry, resend and reconcile refuse with codes an operator will see in a terminal."""
    from tidings.campaigns.reconcile import ReconcileRefused
    from tidings.campaigns.retry import ResendRefused, RetryRefused

    for error in (RetryRefused, ResendRefused, ReconcileRefused):
        assert f"`{error.code}`" in DOC
