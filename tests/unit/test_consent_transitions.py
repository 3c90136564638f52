"""The consent transitions (`tidings.domain.consent.decide`) hold their promises for any
sequence of events: who may confirm, what survives an unsubscribe, what an import may touch."""

from hypothesis import given
from hypothesis import strategies as st

from tidings.domain import consent
from tidings.domain.audience import Source
from tidings.domain.consent import SubscriptionState, decide

PENDING, CONFIRMED, UNSUBSCRIBED = SubscriptionState
states = st.sampled_from([None, *SubscriptionState])
events = st.one_of(
    st.builds(consent.Subscribe, st.sampled_from(Source), st.booleans()),
    st.builds(consent.ConfirmByLink, st.sampled_from(["192.0.2.1", None])),
    st.builds(consent.SubscribeInPreferences),
    st.builds(consent.AssertConsent, st.just("key1")),
    st.builds(
        consent.Import, st.sampled_from(SubscriptionState), st.just("import:ops"), st.booleans()
    ),
    st.builds(consent.Unsubscribe),
)


@given(before=states, event=events)
def test_every_new_confirmation_carries_its_evidence(
    before: SubscriptionState | None, event: consent.Event
) -> None:
    """Consent we cannot account for is consent we do not have (AUD-6, AUD-9)."""
    decision = decide(before, event)
    if isinstance(decision, consent.Transition) and decision.confirms:
        assert decision.evidence
        assert not decision.ask_to_confirm


@given(event=events)
def test_only_the_person_or_their_mailbox_undoes_an_unsubscribe(event: consent.Event) -> None:
    """A public subscribe or a tick on the preferences page revives to pending (a fresh
    confirmation); an import or an admin never revives."""
    decision = decide(UNSUBSCRIBED, event)
    if isinstance(decision, consent.Refusal):
        assert isinstance(event, consent.AssertConsent | consent.ConfirmByLink)
        return
    if isinstance(event, consent.Subscribe | consent.SubscribeInPreferences):
        assert (decision.after, decision.ask_to_confirm) == (PENDING, True)
        assert decision.revives
    else:
        assert decision.after is UNSUBSCRIBED
        assert not decision.changed


@given(before=states, suppressed=st.booleans())
def test_a_suppressed_address_is_never_imported_as_confirmed(
    before: SubscriptionState | None, suppressed: bool
) -> None:
    """Suppression blocks a later re-import (AUD-8): the assertion waits, the row is kept."""
    decision = decide(before, consent.Import(CONFIRMED, "import:ops", suppressed))
    assert isinstance(decision, consent.Transition)
    assert decision.confirms == (not suppressed and before in (None, PENDING))


@given(before=states, double_opt_in=st.booleans(), source=st.sampled_from(Source))
def test_subscribing_asks_for_confirmation_unless_confirmed_or_single_opt_in(
    before: SubscriptionState | None, double_opt_in: bool, source: Source
) -> None:
    """AUD-5: new, pending and revived subscriptions get a link; confirmed ones change nothing."""
    decision = decide(before, consent.Subscribe(source, double_opt_in))
    assert isinstance(decision, consent.Transition)
    if before is CONFIRMED:
        assert not decision.changed
    elif double_opt_in or before is UNSUBSCRIBED:
        assert (decision.after, decision.ask_to_confirm) == (PENDING, True)
    else:
        assert decision.evidence == f"single_opt_in:{source.value}"


@given(before=states, history=st.lists(events, max_size=8))
def test_unsubscribe_always_ends_mailing_and_counts_once(
    before: SubscriptionState | None, history: list[consent.Event]
) -> None:
    """Whatever came before, an unsubscribe leaves the subscription unmailable (AUD-7), and
    a second one changes nothing (the history counts each real unsubscribe once)."""
    state = before
    for event in history:
        decision = decide(state, event)
        if isinstance(decision, consent.Transition):
            state = decision.after
    decision = decide(state, consent.Unsubscribe())
    if state is None:
        assert isinstance(decision, consent.Refusal)
        return
    assert isinstance(decision, consent.Transition)
    assert decision.after is UNSUBSCRIBED
    assert decision.unsubscribes == (state is not UNSUBSCRIBED)
    again = decide(UNSUBSCRIBED, consent.Unsubscribe())
    assert isinstance(again, consent.Transition)
    assert not again.changed


@given(before=states)
def test_a_tick_on_the_preferences_page_never_confirms(before: SubscriptionState | None) -> None:
    """A forwarded email must not let its reader sign the recipient up (AUD-7): a newsletter
    not yet confirmed gets a confirmation email, and only the link in it confirms."""
    decision = decide(before, consent.SubscribeInPreferences())
    assert isinstance(decision, consent.Transition)
    assert not decision.confirms
    if before is CONFIRMED:
        assert not decision.changed
    elif before is PENDING:
        assert not decision.changed  # already waiting for its link: no second email
    else:
        assert (decision.after, decision.ask_to_confirm) == (PENDING, True)
