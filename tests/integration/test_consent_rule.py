"""The consent rule as SQL (selection) and as Python (send-time re-check) agree (AUD-4)."""

from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, insert

from tidings.domain.audience import is_mailable
from tidings.storage import subscriptions as subscription_queries
from tidings.storage.database import Database
from tidings.storage.tables import newsletters, subscribers, subscriptions, suppressions

NOW = datetime(2026, 1, 1, tzinfo=UTC)
case = st.tuples(st.booleans(), st.booleans(), st.booleans())  # confirmed, unsubscribed, suppressed


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cases=st.lists(case, min_size=1, max_size=12))
async def test_sql_and_send_time_consent_agree(
    db: Database, cases: list[tuple[bool, bool, bool]]
) -> None:
    # If selection and the send-time re-check disagreed, someone would be mailed who may not
    # be, or a campaign would fail on people it selected.
    async with db.write() as conn:
        for table in (subscriptions, subscribers, suppressions, newsletters):
            await conn.execute(delete(table))
        newsletter_id = (
            await conn.execute(
                insert(newsletters)
                .values(
                    slug="n",
                    name="N",
                    sender_name="N",
                    sender_address="n@example.org",
                    created_at=NOW,
                    updated_at=NOW,
                )
                .returning(newsletters.c.id)
            )
        ).scalar_one()
        expected = []
        for number, (confirmed, unsubscribed, suppressed) in enumerate(cases):
            subscriber_id = (
                await conn.execute(
                    insert(subscribers)
                    .values(
                        email=f"p{number}@example.org",
                        email_key=f"p{number}@example.org",
                        email_hash=f"hash{number}",
                        tier="free",
                        attributes={},
                        created_at=NOW,
                        updated_at=NOW,
                    )
                    .returning(subscribers.c.id)
                )
            ).scalar_one()
            await conn.execute(
                insert(subscriptions).values(
                    subscriber_id=subscriber_id,
                    newsletter_id=newsletter_id,
                    source="form",
                    created_at=NOW,
                    updated_at=NOW,
                    confirmed_at=NOW if confirmed else None,
                    unsubscribed_at=NOW if unsubscribed else None,
                    unsubscribe_count=1 if unsubscribed else 0,
                    last_unsubscribed_at=NOW if unsubscribed else None,
                )
            )
            if suppressed:
                await conn.execute(
                    insert(suppressions).values(
                        email_hash=f"hash{number}", reason="admin", created_by="t", created_at=NOW
                    )
                )
            if is_mailable(NOW if confirmed else None, NOW if unsubscribed else None, suppressed):
                expected.append(subscriber_id)
    async with db.read() as conn:
        selected = await subscription_queries.mailable_subscriber_ids(conn, newsletter_id)
    assert selected == expected
