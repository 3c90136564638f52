"""Checking an RSA PKCS #1 v1.5 signature against an X.509 certificate's public key, as Amazon
SNS signs its messages (SHA1withRSA for SignatureVersion 1, SHA256withRSA for 2).

Verification only, with public values: the certificate's DER is walked just far enough to
find its RSA key (modulus and exponent), and the signature is checked by building the one
encoded message it must open to (RFC 8017 §8.2.2, EMSA-PKCS1-v1_5) and comparing the whole
of it, never by parsing what the signature opens to (which is how lax verifiers accept
forgeries). Trust in the certificate itself comes from how it was fetched (https from the
provider's host), not from here.
"""

from __future__ import annotations

import hashlib
import hmac
import ssl

RSA_ENCRYPTION = bytes.fromhex("2a864886f70d010101")  # OID 1.2.840.113549.1.1.1
DIGEST_INFO = {  # DER prefix of DigestInfo per hash (RFC 8017 §9.2, note 1)
    "sha1": bytes.fromhex("3021300906052b0e03021a05000414"),
    "sha256": bytes.fromhex("3031300d060960864801650304020105000420"),
}
MIN_MODULUS_BITS = 1024


class BadCertificate(ValueError):
    """The certificate is not DER/PEM X.509 with an RSA key."""


def _element(data: bytes, offset: int) -> tuple[int, int, int]:
    """(tag, start of contents, end of contents) of the DER element at `offset`."""
    if offset + 2 > len(data):
        raise BadCertificate("truncated DER")
    tag, length = data[offset], data[offset + 1]
    offset += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or offset + count > len(data):
            raise BadCertificate("bad DER length")
        length = int.from_bytes(data[offset : offset + count], "big")
        offset += count
    if offset + length > len(data):
        raise BadCertificate("truncated DER")
    return tag, offset, offset + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    found = []
    while start < end:
        element = _element(data, start)
        found.append(element)
        start = element[2]
    return found


def rsa_public_key(certificate: bytes) -> tuple[int, int]:
    """(modulus, public exponent) of a PEM or DER X.509 certificate's RSA key."""
    if certificate.lstrip().startswith(b"-----BEGIN CERTIFICATE-----"):
        try:
            certificate = ssl.PEM_cert_to_DER_cert(certificate.decode("ascii").strip())
        except (ValueError, UnicodeDecodeError):
            raise BadCertificate("not a PEM certificate") from None
    tag, start, end = _element(certificate, 0)
    if tag != 0x30:
        raise BadCertificate("not a certificate")
    tbs = _children(certificate, start, end)[0]
    fields = _children(certificate, tbs[1], tbs[2])
    if fields and fields[0][0] == 0xA0:  # [0] version, present from v2 on
        fields = fields[1:]
    if len(fields) < 6:
        raise BadCertificate("not a certificate")
    key_info = _children(certificate, fields[5][1], fields[5][2])  # subjectPublicKeyInfo
    algorithm = _children(certificate, key_info[0][1], key_info[0][2])[0]
    if certificate[algorithm[1] : algorithm[2]] != RSA_ENCRYPTION:
        raise BadCertificate("not an RSA key")
    bits = key_info[1]
    if bits[0] != 0x03 or certificate[bits[1]] != 0:
        raise BadCertificate("bad key bit string")
    _, key_start, key_end = _element(certificate, bits[1] + 1)
    modulus, exponent = _children(certificate, key_start, key_end)[:2]
    n = int.from_bytes(certificate[modulus[1] : modulus[2]], "big")
    e = int.from_bytes(certificate[exponent[1] : exponent[2]], "big")
    if n.bit_length() < MIN_MODULUS_BITS or e < 3:
        raise BadCertificate("the RSA key is too weak")
    return n, e


def verify(public_key: tuple[int, int], signature: bytes, message: bytes, hash_name: str) -> bool:
    """True when `signature` is `message` signed (PKCS #1 v1.5, `hash_name`) by the key."""
    n, e = public_key
    size = (n.bit_length() + 7) // 8
    if len(signature) != size:
        return False
    value = int.from_bytes(signature, "big")
    if value >= n:
        return False
    opened = pow(value, e, n).to_bytes(size, "big")
    digest = DIGEST_INFO[hash_name] + hashlib.new(hash_name, message).digest()
    padding = size - len(digest) - 3
    if padding < 8:
        return False
    expected = b"\x00\x01" + b"\xff" * padding + b"\x00" + digest
    return hmac.compare_digest(opened, expected)
