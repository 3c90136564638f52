"""Each job kind's payload type round-trips through the stored JSON and refuses a malformed
one as a permanent failure (HOUSE rule 19)."""

from datetime import UTC, datetime
from typing import Any

import pytest

from tidings.domain.jobs import GiveUp, JobStatus
from tidings.outbound.email_jobs import RawEmail, TransactionalEmail, email_of
from tidings.outbound.webhooks import DeliverWebhook
from tidings.queue.job import Job

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _job(kind: str, payload: dict[str, Any]) -> Job:
    return Job(
        id=1,
        kind=kind,
        idempotency_key="k",
        payload=payload,
        status=JobStatus.RUNNING,
        attempts=1,
        max_attempts=3,
        run_at=NOW,
        locked_until=NOW,
        claim_token="t",
        last_error=None,
        created_at=NOW,
        updated_at=NOW,
        finished_at=None,
    )


def _read(job: Job) -> object:
    return email_of(job) if job.kind == "send_email" else DeliverWebhook.from_job(job)


@pytest.mark.parametrize(
    "payload",
    [
        TransactionalEmail(
            to="a@example.org",
            subject="Hi",
            text="text",
            html=None,
            sender="n@example.org",
            headers={"X-Tag": "1"},
        ),
        RawEmail(sender="n@example.org", to="a@example.org", data=b"\x00\xffraw", message_id="<m>"),
        DeliverWebhook(delivery_id=7),
    ],
)
def test_payload_survives_the_job_table(
    payload: TransactionalEmail | RawEmail | DeliverWebhook,
) -> None:
    """What a producer enqueues is exactly what the handler reads back, typed."""
    assert _read(_job(payload.kind, payload.to_payload())) == payload


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("send_email", {"to": "a@example.org"}),  # fields missing
        ("send_email", {"raw_b64": "not base64!", "sender": "s", "to": "t", "message_id": "m"}),
        ("deliver_webhook", {"delivery_id": "seven"}),
        ("deliver_webhook", {}),
    ],
)
def test_malformed_payload_is_a_permanent_failure(kind: str, payload: dict[str, Any]) -> None:
    """Retrying cannot repair a payload, so the job dies at once instead of using up retries."""
    with pytest.raises(GiveUp, match=f"malformed {kind} payload"):
        _read(_job(kind, payload))


def test_a_job_of_another_kind_is_refused() -> None:
    """A handler given another kind's job must not guess at its fields."""
    with pytest.raises(GiveUp, match="not a deliver_webhook job"):
        DeliverWebhook.from_job(_job("send_email", {"delivery_id": 1}))
