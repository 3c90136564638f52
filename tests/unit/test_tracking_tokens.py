"""Tracking tokens (ENG-2): a link token names a stored link and a message token one message;
a forged, altered or truncated one reads as nothing, so it can never redirect anywhere."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.tracking import (
    MAX_TOKEN_LENGTH,
    HitKind,
    LinkRef,
    TrackingSigner,
    tracked_url,
)

SENT = datetime(2026, 12, 5, 9, 30, tzinfo=UTC)
SIGNER = TrackingSigner("a-site-secret")


def test_a_link_token_reads_back_as_the_link_it_names() -> None:
    """A click URL leads to the stored link it was minted for, and no other."""
    token = SIGNER.link_token(42, "paid", 3)
    assert SIGNER.read_link(token) == LinkRef(42, "paid", 3)


def test_an_aggregate_message_token_names_nobody_and_is_new_each_time() -> None:
    """An aggregate message token is random per message: it names nobody, yet counts uniques."""
    first = SIGNER.message_token(42, SENT)
    second = SIGNER.message_token(42, SENT)
    assert first != second  # a random per-message value, not derived from anyone
    read = SIGNER.read_message(42, first)
    assert read is not None
    assert read.recipient_id is None
    assert read.sent_at == SENT


def test_a_per_person_token_names_the_recipient_row() -> None:
    """With consent, the token names the recipient row, so the hit joins that person's activity."""
    read = SIGNER.read_message(42, SIGNER.message_token(42, SENT, recipient_id=9001))
    assert read is not None
    assert read.recipient_id == 9001


def test_a_message_token_of_another_campaign_or_key_is_refused() -> None:
    """A token from another campaign or another site key counts for nothing here."""
    token = SIGNER.message_token(42, SENT, recipient_id=7)
    assert SIGNER.read_message(43, token) is None
    assert TrackingSigner("another-secret").read_message(42, token) is None
    assert TrackingSigner("another-secret").read_link(SIGNER.link_token(42, "free", 1)) is None


def test_an_altered_recipient_or_link_number_is_refused() -> None:
    """Changing the person or link number in a token (or dropping the person) breaks its MAC."""
    token = SIGNER.message_token(42, SENT, recipient_id=7)
    kind, sent, key, _recipient, signature = token.split(".")
    assert SIGNER.read_message(42, f"{kind}.{sent}.{key}.8.{signature}") is None
    assert SIGNER.read_message(42, f"a.{sent}.{key}.{signature}") is None  # dropping the person
    link = SIGNER.link_token(42, "free", 1).split(".")
    assert SIGNER.read_link(".".join([link[0], link[1], "2", link[3]])) is None


@given(st.text(max_size=400))
def test_no_arbitrary_text_reads_as_a_token(text: str) -> None:
    """No text a stranger types reads as a token: the redirect can never be made open."""
    assert SIGNER.read_link(text) is None
    assert SIGNER.read_message(42, text) is None


@given(st.integers(min_value=1, max_value=len(SIGNER.link_token(42, "free", 1)) - 1))
def test_a_truncated_link_token_is_refused(cut: int) -> None:
    """A token cut short (a mail client wrapping a line) is refused, not misread."""
    assert SIGNER.read_link(SIGNER.link_token(42, "free", 1)[:cut]) is None


def test_tokens_fit_a_url_and_the_length_limit() -> None:
    """The largest tokens fit the length limit the endpoint enforces before any work."""
    link = SIGNER.link_token(2**62, "a" * 64, 999_999)
    message = SIGNER.message_token(2**62, SENT, recipient_id=2**62)
    assert len(link) <= MAX_TOKEN_LENGTH
    assert len(message) <= MAX_TOKEN_LENGTH
    url = tracked_url("https://news.example.org/", HitKind.CLICK, link, message)
    assert url == f"https://news.example.org/c/{link}/{message}"
    assert SIGNER.read_link("9" * (MAX_TOKEN_LENGTH + 1)) is None
