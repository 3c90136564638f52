"""DKIM signatures (PRV-7) as dkimpy's verifier judges them: over-signed headers, `x=` expiry,
and a private key file others can read refused at boot."""

from __future__ import annotations

import base64
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import dkim
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tidings.config import ConfigurationError, load_settings
from tidings.delivery.dkim_signer import DkimSigner

MESSAGE = (
    b"From: The Gazette <desk@example.org>\r\n"
    b"To: reader@example.net\r\n"
    b"Subject: Issue 12\r\n"
    b"Date: Fri, 04 Dec 2026 17:00:00 +0000\r\n"
    b"Message-ID: <12.1@example.org>\r\n"
    b"MIME-Version: 1.0\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"List-Id: Gazette <weekly.example.org>\r\n"
    b"List-Unsubscribe: <https://example.org/unsubscribe/1.x>\r\n"
    b"\r\n"
    b"Hello, reader.\r\n"
)


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _dns(key: rsa.RSAPrivateKey) -> Any:
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    record = b"v=DKIM1; k=rsa; p=" + base64.b64encode(public)

    def lookup(name: bytes, timeout: int = 5) -> bytes | None:
        return record if name == b"news._domainkey.example.org." else None

    return lookup


def _signer(key: rsa.RSAPrivateKey, expiry: timedelta | None = None) -> DkimSigner:
    return DkimSigner(selector="news", domain="example.org", private_key=_pem(key), expiry=expiry)


def _tags(signed: bytes) -> dict[str, str]:
    header = signed.split(b"\r\n\r\n", 1)[0].decode()
    value = header.split("DKIM-Signature:", 1)[1].split("\r\nFrom:", 1)[0]
    return dict(part.split("=", 1) for part in "".join(value.split()).split(";") if part)


@pytest.mark.parametrize(
    "added",
    [
        b"Subject: Your account is suspended\r\n",
        b"Content-Type: text/html; charset=utf-8\r\n",
        b"From: Your Bank <alerts@bank.example>\r\n",
        b"Reply-To: thief@evil.example\r\n",
        b"Sender: thief@evil.example\r\n",
        b"List-Unsubscribe: <https://evil.example/u>\r\n",
    ],
)
def test_a_header_added_after_signing_breaks_the_signature(
    key: rsa.RSAPrivateKey, added: bytes
) -> None:
    """A signed message must not carry a second Subject or Content-Type that readers see instead."""
    signed = _signer(key).sign(MESSAGE)
    assert dkim.verify(signed, dnsfunc=_dns(key))
    signature, rest = signed.split(b"\r\nFrom:", 1)
    prepended = signature + b"\r\n" + added + b"From:" + rest
    assert not dkim.verify(prepended, dnsfunc=_dns(key))
    head, body = signed.split(b"\r\n\r\n", 1)
    appended = head + b"\r\n" + added + b"\r\n" + body
    assert not dkim.verify(appended, dnsfunc=_dns(key))


def test_every_header_readers_rely_on_is_signed_one_more_time_than_it_occurs(
    key: rsa.RSAPrivateKey,
) -> None:
    """Over-signing is what h= says: each present header twice, each absent one once."""
    names = _tags(_signer(key).sign(MESSAGE))["h"].lower().split(":")
    for present in ("from", "to", "subject", "date", "message-id", "mime-version"):
        assert names.count(present) == 2, present
    for present in ("content-type", "list-id", "list-unsubscribe"):
        assert names.count(present) == 2, present
    for absent in ("reply-to", "sender", "cc", "list-unsubscribe-post"):
        assert names.count(absent) == 1, absent


def test_a_signature_with_an_expiry_fails_once_it_has_passed(key: rsa.RSAPrivateKey) -> None:
    """A replayed copy of old mail must stop passing DKIM when the operator sets an expiry."""
    signer = _signer(key, expiry=timedelta(hours=1))
    fresh = signer.sign(MESSAGE)
    tags = _tags(fresh)
    assert int(tags["x"]) - int(tags["t"]) == 3600
    assert dkim.verify(fresh, dnsfunc=_dns(key))
    # dkimpy allows 10 hours for clocks that are off; two days is past that.
    stale = signer.sign(MESSAGE, now=time.time() - 2 * 86400)
    assert not dkim.verify(stale, dnsfunc=_dns(key))
    assert "x" not in _tags(_signer(key).sign(MESSAGE))


def test_the_expiry_setting_reads_a_duration() -> None:
    """Operators write `7d` as they do for other durations; a bad one names the key."""
    key_less = {"dkim": {}}
    assert load_settings(**key_less).dkim.expiry is None
    with pytest.raises(ConfigurationError, match=r"dkim\.expiry"):
        load_settings(dkim={"expiry": "soon"})


def test_a_key_file_others_can_read_is_refused_at_boot_with_the_fix_named(
    key: rsa.RSAPrivateKey, tmp_path: Path
) -> None:
    """Anyone who can read the DKIM key can sign mail as the domain: boot must refuse it."""
    path = tmp_path / "dkim.pem"
    path.write_bytes(_pem(key))
    dkim_keys = {"selector": "news", "domain": "example.org", "private_key_file": str(path)}
    for mode in (0o644, 0o640, 0o604, 0o660):
        path.chmod(mode)
        with pytest.raises(ConfigurationError, match=r"dkim\.private_key_file.*chmod 600"):
            load_settings(dkim=dkim_keys)
    assert load_settings(dkim={**dkim_keys, "require_safe_key": False}).dkim.enabled
    path.chmod(0o600)
    settings = load_settings(dkim={**dkim_keys, "expiry": "7d"})
    assert settings.dkim.enabled
    assert settings.dkim.expiry == timedelta(days=7)
