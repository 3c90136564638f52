"""Consent decided once (`tidings.domain.consent`), written by the paths the use cases take, and
read back by the predicate as SQL (selection) and as Python (send-time re-check): all three
agree, on both dialects (AUD-4..7, AUD-9)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete

from tests.support import rows
from tests.support.audience import audience_context
from tests.support.clock import Clock
from tidings.audience.consent import ConsentRecorder
from tidings.domain import consent
from tidings.domain.audience import Source
from tidings.domain.consent import SubscriptionState, is_mailable, subscription_state
from tidings.storage import importing
from tidings.storage import subscriptions as subscription_queries
from tidings.storage.database import Database
from tidings.storage.tables import jobs, newsletters, subscribers, subscriptions, suppressions

IMPORT_EVIDENCE = "import:ops"
events = st.one_of(
    st.builds(consent.Subscribe, st.sampled_from(Source), st.booleans()),
    st.builds(consent.ConfirmByLink, st.sampled_from(["192.0.2.1", None])),
    st.builds(consent.SubscribeInPreferences),
    st.builds(consent.AssertConsent, st.just("key1")),
    st.sampled_from(SubscriptionState),  # an import row asking for this state
    st.builds(consent.Unsubscribe),
)
person = st.tuples(st.lists(events, max_size=6), st.booleans())  # (events, suppressed)


async def _apply_import(
    db: Database, subscriber_id: int, newsletter_id: int, transition: consent.Transition
) -> None:
    """What the import's chunk writer does with one planned row."""
    async with db.write() as conn:
        now = rows.NOW
        if transition.creates:
            await importing.insert_subscriptions(
                conn,
                [
                    {
                        "subscriber_id": subscriber_id,
                        "newsletter_id": newsletter_id,
                        "created_at": now,
                    }
                ],
                state=transition.after.value,
                source=Source.IMPORT.value,
                evidence=IMPORT_EVIDENCE,
                now=now,
            )
            return
        found = await subscription_queries.get(conn, subscriber_id, newsletter_id)
        assert found is not None
        if transition.confirms:
            await importing.confirm_subscriptions(
                conn, [found.id], evidence=IMPORT_EVIDENCE, now=now
            )
        elif transition.unsubscribes:
            await importing.unsubscribe_subscriptions(conn, [found.id], now=now)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(people=st.lists(person, min_size=1, max_size=5))
async def test_transitions_and_both_predicates_agree(
    db: Database, people: list[tuple[list[object], bool]]
) -> None:
    """If the decision, the stored row, selection and the send-time re-check disagreed,
    someone would be mailed who may not be, or a campaign would fail on people it selected."""
    clock = Clock()
    recorder = ConsentRecorder(audience_context(db, clock))
    async with db.write() as conn:
        for table in (jobs, subscriptions, subscribers, suppressions, newsletters):
            await conn.execute(delete(table))
        newsletter_id = await rows.newsletter(conn)
    expected: list[int] = []
    for number, (steps, suppressed) in enumerate(people):
        async with db.write() as conn:
            subscriber_id = await rows.subscriber(conn, email=f"p{number}@example.org")
        state: SubscriptionState | None = None
        unsubscribes = 0
        for step in steps:
            clock.advance()
            event = (
                consent.Import(step, IMPORT_EVIDENCE, suppressed)
                if isinstance(step, SubscriptionState)
                else step
            )
            decision = consent.decide(state, event)  # type: ignore[arg-type]
            if isinstance(decision, consent.Refusal):
                continue
            if isinstance(event, consent.Import):
                await _apply_import(db, subscriber_id, newsletter_id, decision)
            else:
                async with db.write() as conn:
                    row, before = await recorder.subscription(
                        conn, subscriber_id, newsletter_id, source=Source.FORM, now=clock()
                    )
                    assert before == state
                    await recorder.record(conn, row, decision, now=clock())
            state, unsubscribes = decision.after, unsubscribes + decision.unsubscribes
            async with db.read() as conn:
                stored = await subscription_queries.get(conn, subscriber_id, newsletter_id)
            assert stored is not None
            assert subscription_state(stored.confirmed_at, stored.unsubscribed_at) is state
            assert stored.unsubscribe_count == unsubscribes  # history kept through revives
            assert (stored.consent_evidence is not None) or state is not SubscriptionState.CONFIRMED
        if suppressed:
            async with db.write() as conn:
                await rows.suppression(conn, f"hash:p{number}@example.org")
        if state is not None:
            async with db.read() as conn:
                stored = await subscription_queries.get(conn, subscriber_id, newsletter_id)
            assert stored is not None
            mailable = is_mailable(stored.confirmed_at, stored.unsubscribed_at, suppressed)
            assert mailable == (state is SubscriptionState.CONFIRMED and not suppressed)
            if mailable:
                expected.append(subscriber_id)
    async with db.read() as conn:
        selected = await subscription_queries.mailable_subscriber_ids(conn, newsletter_id)
    assert selected == expected
