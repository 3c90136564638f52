"""Checking an RSA PKCS #1 v1.5 signature against an X.509 certificate's public key, as Amazon
SNS signs its messages (SHA1withRSA for SignatureVersion 1, SHA256withRSA for 2).

Through OpenSSL (the `cryptography` package, a dependency since DKIM signing): the certificate
is parsed by a real X.509 parser and the signature checked by OpenSSL's PKCS #1 v1.5
verifier, which rebuilds the whole encoded message and compares it (RFC 8017 §8.2.2) rather
than parsing what the signature opens to. dkimpy's own primitives were the other candidate:
`dkim.crypto` verifies PKCS #1 v1.5, but it reads only bare public keys, not certificates.
Trust in the certificate itself comes from how it was fetched (https from the provider's
host), not from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# cryptography is loaded when a certificate is first read: a worker never reads one.
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

MIN_MODULUS_BITS = 1024


class BadCertificate(ValueError):
    """The certificate is not DER/PEM X.509 with an RSA key."""


def rsa_public_key(certificate: bytes) -> RSAPublicKey:
    """The RSA public key of a PEM or DER X.509 certificate; `BadCertificate` otherwise."""
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric import rsa

    try:
        if certificate.lstrip().startswith(b"-----BEGIN CERTIFICATE-----"):
            parsed = x509.load_pem_x509_certificate(certificate.strip())
        else:
            parsed = x509.load_der_x509_certificate(certificate)
        key = parsed.public_key()
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise BadCertificate("not an X.509 certificate") from None
    if not isinstance(key, rsa.RSAPublicKey):
        raise BadCertificate("not an RSA key")
    if key.key_size < MIN_MODULUS_BITS or key.public_numbers().e < 3:
        raise BadCertificate("the RSA key is too weak")
    return key


def verify(public_key: RSAPublicKey, signature: bytes, message: bytes, hash_name: str) -> bool:
    """True when `signature` is `message` signed (PKCS #1 v1.5, `hash_name`) by the key."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    algorithm = {"sha1": hashes.SHA1, "sha256": hashes.SHA256}[hash_name]
    try:
        public_key.verify(signature, message, padding.PKCS1v15(), algorithm())
    except InvalidSignature:
        return False
    return True
