"""Which failed recipients a retry sends again is one rule (SND-19), written once in the domain
and once as SQL for the bulk update; on both dialects the two must pick the same rows, even
for reason codes full of LIKE's wildcard characters."""

from __future__ import annotations

from sqlalchemy import select, update

from tests.factories import make_settings
from tests.support.sending import (
    FAST_QUEUE,
    prepared_send,
    studio_with,
)
from tidings.domain.send_status import is_resendable_failure
from tidings.domain.sending import RecipientState
from tidings.storage.sending import send_repairs
from tidings.storage.tables import campaign_recipients

REASONS = [
    "smtp_temporary_451",
    "smtp_deferred_452",
    "mailgun_deferred_421",
    "SMTP_TEMPORARY_421",
    "smtptemporary_451",  # `_` is LIKE's any-character: must not match without the underscore
    "smtp%deferred",
    "smtp_%_permanent",
    "reconciled_not_sent",
    "reconciled_not_sent_after_all",
    "smtp_permanent_550",
    "smtp_rejected_550",
    "smtp_rejected_554",  # relay access denied, before a refusal of the sender was told apart
    "SMTP_REJECTED_535",
    "smtp_permanent_530",
    "smtp_rejected_5540",
    "provider_error_KeyError",
    "in_flight_at_crash",
    "x/_temporary",  # the escape character itself
]


async def test_the_sql_and_the_domain_agree_on_resendable_failures(database_url: str) -> None:
    """If the SQL picked a reader the rule excludes, a permanent refusal would be mailed
    again; if it missed one, a deferred reader would never get the issue."""
    settings = make_settings(database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 20})
    async with studio_with(settings, len(REASONS)) as (client, container, headers):
        campaign_id = await prepared_send(client, container, headers)
        async with container.db.write() as conn:
            ids = (
                await conn.execute(
                    select(campaign_recipients.c.id)
                    .where(campaign_recipients.c.campaign_id == campaign_id)
                    .order_by(campaign_recipients.c.id)
                )
            ).scalars()
            for recipient_id, reason in zip(ids, REASONS, strict=True):
                await conn.execute(
                    update(campaign_recipients)
                    .where(campaign_recipients.c.id == recipient_id)
                    .values(state="failed", reason=reason)
                )
            moved = await send_repairs.requeue_recipients(
                conn, campaign_id, [RecipientState.FAILED], now=container.sending.now()
            )
            again = {
                reason
                for (reason,) in await conn.execute(
                    select(campaign_recipients.c.reason).where(
                        campaign_recipients.c.campaign_id == campaign_id,
                        campaign_recipients.c.state == "failed",
                    )
                )
            }
    expected = {reason for reason in REASONS if is_resendable_failure(reason)}
    assert moved == len(expected)
    assert again == set(REASONS) - expected
    assert "smtptemporary_451" not in expected
    assert "SMTP_TEMPORARY_421" in expected
    assert {"smtp_rejected_554", "SMTP_REJECTED_535", "smtp_permanent_530"} <= expected
    assert "smtp_rejected_5540" not in expected
