"""The recipient checks of SND-10 before any provider call, on the rows a `send_batch` job
read: who may still be mailed, that no two collapse to one address, and the values that
personalise each message."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from tidings.domain import tokens
from tidings.domain.email_headers import check_address
from tidings.domain.errors import InvalidInput
from tidings.domain.sending import Exclusion, check_count
from tidings.rendering import RecipientValues
from tidings.rendering.tracking import LinkTracking
from tidings.storage.sending.batch_recipients import RecipientRow
from tidings.storage.sending.batches import BatchRow


def screen(
    pending: list[RecipientRow],
) -> tuple[list[tuple[RecipientRow, Exclusion]], list[RecipientRow]]:
    """SND-10: who may still be mailed. Gone since selection, consent withdrawn (either half
    of AUD-4, or suppressed — evaluated in SQL), or an address that cannot be sent to."""
    exclusions: list[tuple[RecipientRow, Exclusion]] = []
    sendable: list[RecipientRow] = []
    for row in pending:
        if row.subscriber_id is None or row.email is None:
            exclusions.append((row, Exclusion.MEMBER_NOT_FOUND))
        elif not row.mailable:
            exclusions.append((row, Exclusion.CONSENT_WITHDRAWN))
        else:
            try:
                check_address("to", row.email)
            except InvalidInput:
                exclusions.append((row, Exclusion.INVALID_ADDRESS))
                continue
            sendable.append(row)
    return exclusions, sendable


def check_unique_addresses(batch: BatchRow, sendable: list[RecipientRow]) -> None:
    """Two recipients collapsing to one address would mail one person twice, or drop one:
    fail before any provider call (SND-10)."""
    unique = {str(row.email).lower() for row in sendable}
    check_count(
        "provider_payload_count", expected=len(sendable), actual=len(unique), batch_id=batch.id
    )


class TrackedSend(NamedTuple):
    """What a tracked segment's message tokens need: the campaign and the hand-over time."""

    tracking: LinkTracking
    campaign_id: int
    now: datetime


def recipient_values(
    row: RecipientRow, secret: str, tracked: TrackedSend | None = None
) -> RecipientValues:
    """What personalises one screened recipient's message, its link tokens signed now. With
    `tracked`, its tracking token too: naming the recipient row only for a consented
    subscriber of a per_person newsletter (ENG-1)."""
    assert row.email
    assert row.subscriber_id
    assert row.subscription_id
    assert row.subscriber_created_at
    assert row.subscription_created_at
    return RecipientValues(
        address=row.email,
        name=row.name,
        # Naming the recipient row: an unsubscribe counts for this campaign (SND-27).
        unsubscribe_token=tokens.sign(
            secret,
            "unsubscribe",
            row.subscription_id,
            row.subscription_created_at,
            recipient_id=row.id,
        ),
        preferences_token=tokens.sign(
            secret, "preferences", row.subscriber_id, row.subscriber_created_at
        ),
        subscriber_id=str(row.subscriber_id),
        recipient_id=str(row.id),
        attributes=row.attributes,
        tracking_token=""
        if tracked is None
        else tracked.tracking.message_token(
            tracked.campaign_id,
            tracked.now,
            row.id,
            consented=row.tracking_consent_at is not None,
        ),
    )
