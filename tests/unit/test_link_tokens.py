"""Unsubscribe and preferences tokens are derived, not stored (AUD-6, AUD-7): a link already
in someone's mailbox must keep working whatever the code that computes it becomes."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from tidings.domain import tokens

STAMP = datetime(2026, 3, 1, 12, 30, 5, 123456, tzinfo=UTC)


def test_a_token_minted_by_earlier_releases_still_verifies() -> None:
    """Mail sent months ago carries this exact token; changing how it is computed must not
    strand its reader without a working unsubscribe link."""
    secret = "site-secret-for-the-known-answer"
    token = "4242.kI-hw4r4Q_nzuxw7ge_7fkkOMLf9L7Ow"
    assert tokens.sign(secret, "unsubscribe", 4242, STAMP) == token
    assert tokens.verify(secret, "unsubscribe", token, STAMP)
    assert not tokens.verify(secret, "preferences", token, STAMP)


@given(
    secret=st.text(min_size=1, max_size=200),
    purpose=st.sampled_from(["unsubscribe", "preferences"]),
    object_id=st.integers(min_value=1, max_value=2**63 - 1),
    micros=st.integers(min_value=0, max_value=4_000_000_000_000_000),
)
def test_the_signature_is_standard_hmac_sha256(
    secret: str, purpose: str, object_id: int, micros: int
) -> None:
    """The fast path (key schedule once per secret) is RFC 2104 HMAC-SHA256 for every key
    length, long keys (hashed first) included, so any HMAC library can check a token."""
    stamp = datetime.fromtimestamp(micros / 1_000_000, UTC)
    signed_stamp = int(stamp.timestamp() * 1_000_000)
    message = f"{purpose}:{object_id}:{signed_stamp}".encode()
    digest = hmac.new(secret.encode(), message, hashlib.sha256).digest()
    expected = f"{object_id}.{base64.urlsafe_b64encode(digest).decode()[:32]}"
    assert tokens.sign(secret, purpose, object_id, stamp) == expected


def test_a_campaign_link_names_its_recipient_row_and_cannot_be_moved_to_another() -> None:
    """An unsubscribe counts for the campaign whose link was used (SND-27) only if nobody can
    point a link at another campaign's row: the row is signed with the subscription, and a
    link with the row taken off (or another row put on) does not verify."""
    secret = "site-secret"
    token = tokens.sign(secret, "unsubscribe", 4242, STAMP, recipient_id=77)
    assert token.startswith("4242-77.")
    assert tokens.signed_id(token) == 4242
    assert tokens.signed_recipient(token) == 77
    assert tokens.verify(secret, "unsubscribe", token, STAMP)
    signature = token.split(".", 1)[1]
    assert not tokens.verify(secret, "unsubscribe", f"4242-78.{signature}", STAMP)
    assert not tokens.verify(secret, "unsubscribe", f"4242.{signature}", STAMP)
    assert not tokens.verify(secret, "preferences", token, STAMP)
    plain = tokens.sign(secret, "unsubscribe", 4242, STAMP)
    assert tokens.signed_recipient(plain) is None
    assert not tokens.verify(secret, "unsubscribe", f"4242-77.{plain.split('.', 1)[1]}", STAMP)
