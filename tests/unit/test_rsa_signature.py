"""SNS signature checks (PRV-6): a signature opens to exactly the expected encoding, and
anything that is not an RSA certificate is refused rather than half-read."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.sns import make_certificate
from tidings.delivery.rsa_signature import BadCertificate, rsa_public_key, verify


def test_a_signature_verifies_only_for_its_message_hash_and_key(tmp_path: Path) -> None:
    """A forged or altered SNS message must fail, whichever SignatureVersion it claims."""
    key, certificate = make_certificate(tmp_path)
    public = rsa_public_key(certificate.read_bytes())
    message = b"Message\nhello\nType\nNotification\n"
    for hash_name in ("sha1", "sha256"):
        signature = subprocess.run(
            ["openssl", "dgst", f"-{hash_name}", "-sign", str(key)],
            input=message,
            capture_output=True,
            check=True,
        ).stdout
        assert verify(public, signature, message, hash_name)
        assert not verify(public, signature, message + b"x", hash_name)
        assert not verify(public, signature[:-1] + bytes([signature[-1] ^ 1]), message, hash_name)
    (tmp_path / "other").mkdir()
    _, other_certificate = make_certificate(tmp_path / "other")
    assert not verify(rsa_public_key(other_certificate.read_bytes()), signature, message, "sha256")


@pytest.mark.parametrize(
    "junk",
    [
        b"",
        b"\x30\x82\xff\xff",
        b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----",
        b"\x02\x01\x05",
    ],
)
def test_what_is_not_an_rsa_certificate_is_refused(junk: bytes) -> None:
    """A bad certificate from the fetch must be a clean refusal, never an exception escaping."""
    with pytest.raises(BadCertificate):
        rsa_public_key(junk)
