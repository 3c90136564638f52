"""Other tools' labels and statuses read into tidings' terms (issue 38 item 4, AUD-9): pure
functions, so every spelling the exports use is checked here."""

import pytest

from tidings.audience.import_vocabulary import (
    STATUSES,
    header_key,
    normalise_label,
    split_labels,
    status_from_derived,
    tier_from_derived,
)
from tidings.audience.subscribers import LABEL
from tidings.domain.consent import SubscriptionState


@pytest.mark.parametrize(
    ("cell", "labels"),
    [
        ('"vip","early"', ["vip", "early"]),  # Mailchimp's TAGS
        ("VIP;Press Contact", ["VIP", "Press Contact"]),
        ('"Book Club, 2024", "vip"', ["Book Club, 2024", "vip"]),  # a quoted tag with a comma
        ("Early Reader, VIP", ["Early Reader", "VIP"]),  # Ghost, Buttondown, Kit
        ("beta|press", ["beta", "press"]),
        ("", []),
        (' ; ,"" ', []),
    ],
)
def test_label_cells_split_as_each_tool_writes_them(cell: str, labels: list[str]) -> None:
    """A Mailchimp tag list read as one label named `"vip","early"` is a label nobody can
    target: every tool's way of listing tags must come apart into its tags."""
    assert split_labels(cell) == labels


@pytest.mark.parametrize(
    ("raw", "label"),
    [
        ("vip", "vip"),
        ("VIP", "vip"),
        ("Press Contact", "press-contact"),
        ("Book Club, 2024", "book-club-2024"),
        ("Café", "cafe"),
        ("  --odd__one--  ", "odd__one"),
        ("🔥", ""),
        ("x" * 80, "x" * 64),
    ],
)
def test_labels_are_normalised_to_the_filter_alphabet(raw: str, label: str) -> None:
    """Whatever a tool allowed, what is kept must be targetable by `label:NAME` (or be
    reported as unusable, the empty string)."""
    assert normalise_label(raw) == label
    assert label == "" or LABEL.fullmatch(label)


def test_other_tools_statuses_never_make_anyone_mailable() -> None:
    """Another tool's record is not consent this site may assert: only our own `confirmed`
    imports confirmed; bounces and complaints suppress; a spam catch is skipped."""
    confirmed = [
        word for word, meaning in STATUSES.items() if meaning.state is SubscriptionState.CONFIRMED
    ]
    assert confirmed == ["confirmed"]
    assert STATUSES["cleaned"].suppress == "hard_bounce"
    assert STATUSES["bounced"].suppress == "hard_bounce"
    assert STATUSES["undeliverable"].suppress == "hard_bounce"
    assert STATUSES["complained"].suppress == "complaint"
    assert STATUSES["blocklisted"].suppress == "admin"
    assert STATUSES["spammy"].skip
    assert STATUSES["cancelled"].state is SubscriptionState.UNSUBSCRIBED
    assert (STATUSES["premium"].state, STATUSES["premium"].tier) == (
        SubscriptionState.PENDING,
        "paid",
    )
    for meaning in STATUSES.values():
        assert (meaning.state is None) == (meaning.suppress is not None or meaning.skip is not None)


def test_status_and_tier_are_read_from_the_columns_that_imply_them() -> None:
    """Mailchimp, Ghost and Substack have no status column: an unsubscribe time, a cleaned
    time or an email flag says it, and leaving one out would mail someone who left."""
    assert status_from_derived({"cleaned_time": "2022-09-10 11:12:13"}) == "cleaned"
    assert status_from_derived({"unsubscribed_time": "2023-11-12"}) == "unsubscribed"
    assert status_from_derived({"subscribed_to_emails": "false"}) == "unsubscribed"
    assert status_from_derived({"subscribed_to_emails": "true"}) is None
    assert status_from_derived({"email_disabled": "TRUE"}) == "unsubscribed"
    assert status_from_derived({}) is None
    assert tier_from_derived({"complimentary_plan": "true", "paid_tiers": "Gold"}) == "comped"
    assert tier_from_derived({"paid_tiers": "Supporter"}) == "paid"
    assert tier_from_derived({"active_subscription": "true"}) == "paid"
    assert tier_from_derived({"active_subscription": "false"}) is None


def test_header_names_match_whatever_their_spelling() -> None:
    """`Email Address`, `email_address` and `E-mail  address` are one column."""
    assert header_key("Email Address") == header_key("email_address") == "email address"
    assert header_key("UNSUB_TIME") == "unsub time"
