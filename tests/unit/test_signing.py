"""Standard Webhooks signing: secrets, signatures receivers' libraries accept, rotation (DLV-5)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta, timezone

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from tidings.delivery.signing import decode_secret, generate_secret, sign, sign_headers
from tidings.domain.errors import InvalidInput

# The published Standard Webhooks test vector.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

BODY = b'{"type": "subscriber.confirmed", "data": {"id": "sub_1"}}'


def test_signature_matches_the_published_test_vector() -> None:
    """Matching the reference vector is what says any receiver's library will accept us."""
    assert sign(VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY, VECTOR_SECRET) == VECTOR_SIGNATURE


def test_generated_secrets_are_prefixed_random_keys() -> None:
    """Receivers paste the secret into their library, which expects whsec_ and base64."""
    first, second = generate_secret(), generate_secret()
    assert first.startswith("whsec_")
    assert len(base64.b64decode(first.removeprefix("whsec_"))) == 32
    assert len(decode_secret(generate_secret(24))) == 24
    assert first != second


@pytest.mark.parametrize("num_bytes", [16, 23, 65])
def test_generated_secret_length_stays_within_the_specification(num_bytes: int) -> None:
    """Keys outside 24..64 bytes are rejected by strict receivers."""
    with pytest.raises(ValueError, match="num_bytes"):
        generate_secret(num_bytes)


@pytest.mark.parametrize(
    "secret",
    [
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",  # no prefix
        "whsec_MfKQ9r8GKYqrTwjUPD8I$PZIo2LaLaSw",  # not base64: the library would skip the $
        "whsec_" + base64.b64encode(b"x" * 16).decode(),  # too short
        "whsec_",
    ],
)
def test_malformed_secrets_are_refused(secret: str) -> None:
    """A secret we quietly reinterpret would sign with a key the receiver does not hold."""
    with pytest.raises(InvalidInput) as refused:
        decode_secret(secret)
    assert refused.value.field == "secret"


def test_receivers_library_verifies_the_headers() -> None:
    """The whole point of the scheme: an off-the-shelf verifier accepts what we send."""
    secret = generate_secret()
    headers = sign_headers("msg_1", datetime.now(UTC), BODY, [secret])
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert headers["webhook-id"] == "msg_1"
    assert Webhook(secret).verify(BODY, headers) == {
        "type": "subscriber.confirmed",
        "data": {"id": "sub_1"},
    }


def test_a_changed_body_fails_verification() -> None:
    """The signature must cover the body, or a man in the middle could rewrite events."""
    secret = generate_secret()
    headers = sign_headers("msg_1", datetime.now(UTC), BODY, [secret])
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY.replace(b"sub_1", b"sub_2"), headers)


def test_rotation_signs_with_every_secret_so_old_and_new_receivers_verify() -> None:
    """During a rotation the receiver may hold either secret; both must verify, others not."""
    old, new = generate_secret(), generate_secret()
    headers = sign_headers("msg_2", datetime.now(UTC), BODY, [old, new])
    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(old).verify(BODY, headers)
    Webhook(new).verify(BODY, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(generate_secret()).verify(BODY, headers)


def test_timestamp_may_be_seconds_or_any_aware_datetime() -> None:
    """The reference library replaces a datetime's zone instead of converting it; a worker in
    another zone must still sign the instant it means."""
    seconds = 1_700_000_000
    in_utc = datetime.fromtimestamp(seconds, tz=UTC)
    in_paris = in_utc.astimezone(timezone(timedelta(hours=1)))
    expected = sign_headers("msg_3", seconds, BODY, [VECTOR_SECRET])
    assert expected["webhook-timestamp"] == "1700000000"
    assert sign_headers("msg_3", in_utc, BODY, [VECTOR_SECRET]) == expected
    assert sign_headers("msg_3", in_paris, BODY, [VECTOR_SECRET]) == expected


def test_naive_timestamps_and_empty_secret_lists_are_refused() -> None:
    """A naive time is ambiguous by hours; no secret means an unsigned webhook."""
    with pytest.raises(ValueError, match="timezone"):
        sign_headers("msg_4", datetime(2024, 1, 1), BODY, [VECTOR_SECRET])  # noqa: DTZ001
    with pytest.raises(ValueError, match="secret"):
        sign_headers("msg_4", 1_700_000_000, BODY, [])
