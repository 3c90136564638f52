"""DKIM signing of outgoing mail by tidings itself (PRV-7), with dkimpy.

For relays that do not sign: each message is signed just before the per-recipient provider
(SMTP, or the local capture, so `tidings outbox show ID --raw` shows what a relay would get)
takes it. Canonicalisation is relaxed/relaxed, which survives the header re-folding and
whitespace changes relays make. The signature covers the headers a reader and a mailbox
provider rely on, each over-signed: `h=` names it once more than the message holds it (once
for one it lacks, such as Cc or Sender), so a second Subject, From or Content-Type added in
transit, or a missing one added, breaks the signature. With `dkim.expiry` set the signature
carries `x=`, after which verifiers treat it as expired. Batch HTTP providers sign with the
keys set up at the provider, not here.
"""

from __future__ import annotations

import base64
import hashlib
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from tidings.delivery.provider import Envelope, PerRecipientProvider, SendResult
from tidings.domain.errors import InvalidInput

SIGNED_HEADERS: tuple[bytes, ...] = (
    b"from",
    b"sender",
    b"reply-to",
    b"to",
    b"cc",
    b"subject",
    b"date",
    b"message-id",
    b"mime-version",
    b"content-type",
    b"content-transfer-encoding",
    b"list-id",
    b"list-unsubscribe",
    b"list-unsubscribe-post",
    b"list-archive",
    b"list-help",
    b"list-owner",
    b"list-post",
    b"list-subscribe",
    b"feedback-id",
    b"in-reply-to",
    b"references",
)


def oversigned_names(headers: list[tuple[bytes, bytes]]) -> list[bytes]:
    """`h=` for a message: each of SIGNED_HEADERS once more than `headers` holds it. A verifier
    hashes a name listed beyond the message's copies as empty, so any copy added later
    (a second Subject prepended by a relay or an attacker) makes the hash differ."""
    held: dict[bytes, int] = {}
    for name, _ in headers:
        lowered = name.lower()
        held[lowered] = held.get(lowered, 0) + 1
    return [name for name in SIGNED_HEADERS for _ in range(held.get(name, 0) + 1)]


class DkimSigner:
    """Signs serialised messages with one selector, domain and RSA key.

    dkimpy parses, canonicalises and hashes (its own functions, the ones its verifier uses);
    the RSA private-key operation is OpenSSL's, through `cryptography`: dkimpy's pure-Python
    one takes 10-25 ms a message on a 2-core machine and would cut the send rate by 90%, where
    OpenSSL's takes about 0.3 ms (docs/performance.md, `tidings bench send --dkim`)."""

    def __init__(
        self,
        *,
        selector: str,
        domain: str,
        private_key: bytes,
        expiry: timedelta | None = None,
    ) -> None:
        # Loaded only where signing is configured: never by other processes.
        from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        try:
            key = load_pem_private_key(private_key, password=None)
        except (ValueError, TypeError) as exc:
            raise InvalidInput(
                "dkim.private_key_file must hold a PEM RSA private key", field="private_key_file"
            ) from exc
        if not isinstance(key, RSAPrivateKey):
            raise InvalidInput(
                "dkim.private_key_file must hold a PEM RSA private key", field="private_key_file"
            )
        self.selector = selector.encode("ascii")
        self.domain = domain.encode("ascii")
        self.expiry_seconds = None if expiry is None else int(expiry.total_seconds())
        self._key = key

    @classmethod
    def from_file(
        cls, *, selector: str, domain: str, path: Path, expiry: timedelta | None = None
    ) -> DkimSigner:
        try:
            key = path.read_bytes()
        except OSError as exc:
            raise InvalidInput(
                f"dkim.private_key_file: cannot read {path}: {exc.strerror}",
                field="private_key_file",
            ) from None
        return cls(selector=selector, domain=domain, private_key=key, expiry=expiry)

    def sign(self, message: bytes, *, now: float | None = None) -> bytes:
        """`message` with a DKIM-Signature header (RFC 6376, rsa-sha256) in front."""
        import dkim
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding, utils

        headers, body = _parsed(message)
        policy = dkim.CanonicalizationPolicy.from_c_value(b"relaxed/relaxed")
        body_hash = base64.b64encode(hashlib.sha256(policy.canonicalize_body(body)).digest())
        timestamp = int(time.time() if now is None else now)
        signed_names = oversigned_names(headers)
        fields = [
            (b"v", b"1"),
            (b"a", b"rsa-sha256"),
            (b"c", b"relaxed/relaxed"),
            (b"d", self.domain),
            (b"i", b"@" + self.domain),
            (b"q", b"dns/txt"),
            (b"s", self.selector),
            (b"t", str(timestamp).encode("ascii")),
        ]
        if self.expiry_seconds is not None:
            fields.append((b"x", str(timestamp + self.expiry_seconds).encode("ascii")))
        fields += [(b"h", b" : ".join(signed_names)), (b"bh", body_hash), (b"b", b"")]
        unsigned = _folded(fields)
        # The header hash covers the signed headers, then this header with b= empty.
        hasher = hashlib.sha256()
        dkim.hash_headers(
            hasher,
            policy,
            policy.canonicalize_headers(headers),
            signed_names,
            (b"DKIM-Signature", b" " + unsigned),
            {},
        )
        signature = self._key.sign(
            hasher.digest(), padding.PKCS1v15(), utils.Prehashed(hashes.SHA256())
        )
        fields[-1] = (b"b", base64.b64encode(signature))
        return b"DKIM-Signature: " + _folded(fields) + b"\r\n" + message


def _parsed(message: bytes) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """dkimpy's header parse; the body as is when it is CRLF throughout (as our messages are),
    which spares splitting every line of it only to join them again."""
    import dkim

    head, blank, body = message.partition(b"\r\n\r\n")
    if blank and body.count(b"\n") == body.count(b"\r\n"):
        headers, _ = dkim.rfc822_parse(head + blank)
        return headers, body
    parsed: tuple[list[tuple[bytes, bytes]], bytes] = dkim.rfc822_parse(message)
    return parsed


def _folded(fields: list[tuple[bytes, bytes]]) -> bytes:
    """The tag list, folded at whitespace by dkimpy (relaxed canonicalisation unfolds it)."""
    import dkim

    value = b"; ".join(name + b"=" + content for name, content in fields)
    folded: bytes = dkim.fold(value, namelen=len(b"DKIM-Signature"), linesep=b"\r\n")
    return folded


class DkimSigningProvider:
    """A per-recipient provider that signs each message, then hands it to `inner`."""

    def __init__(self, inner: PerRecipientProvider, signer: DkimSigner) -> None:
        self.inner = inner
        self.signer = signer
        self.name = inner.name

    async def send(self, envelope: Envelope) -> SendResult:
        return await self.inner.send(replace(envelope, data=self.signer.sign(envelope.data)))

    async def close(self) -> None:
        await self.inner.close()
